// Host page: a click on a GPU opens the path view from that GPU; the snapshot picker reloads.
import { ready, clickedGpu } from "./plots.js";

const select = document.getElementById("snapshot-select");
if (select) select.addEventListener("change", () => select.form.submit());

ready.then((plots) => {
  const el = document.getElementById("fig-host");
  if (!el || !plots.has("fig-host")) return;
  el.on("plotly_click", (ev) => {
    const gpu = clickedGpu(ev);
    if (!gpu) return;
    const src = `${el.dataset.snapshot}/${gpu}`;
    window.location.href = `/path/?src=${encodeURIComponent(src)}`;
  });
});
