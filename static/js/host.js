// Host page: choosing a GPU -- a click on it in the drawing, or its button beside the drawing (Tab,
// then Enter or Space) -- opens the path view from that GPU; the snapshot picker reloads.
import { ready, clickedGpu } from "./plots.js";

const select = document.getElementById("snapshot-select");
if (select) select.addEventListener("change", () => select.form.submit());

function openPath(snapshot, gpu) {
  window.location.href = `/path/?src=${encodeURIComponent(`${snapshot}/${gpu}`)}`;
}

for (const b of document.querySelectorAll("#gpu-keys button[data-gpu]")) {
  b.addEventListener("click", () => openPath(b.dataset.snapshot, b.dataset.gpu));
}

ready.then((plots) => {
  const el = document.getElementById("fig-host");
  if (!el || !plots.has("fig-host")) return;
  el.on("plotly_click", (ev) => {
    const gpu = clickedGpu(ev);
    if (gpu) openPath(el.dataset.snapshot, gpu);
  });
});
