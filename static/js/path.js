// Path page: pick GPUs from the selectors or by clicking GPU markers; the URL holds the whole view.
import { ready, clickedGpu } from "./plots.js";

const data = JSON.parse(document.getElementById("path-pickers").textContent);
const byId = new Map(data.options.map((o) => [String(o.id), o]));
const form = document.getElementById("path-form");
const srcRef = document.getElementById("src-ref");
const dstRef = document.getElementById("dst-ref");

function fillGpus(hostSel, gpuSel, ref) {
  const opt = byId.get(hostSel.value);
  gpuSel.replaceChildren();
  for (const g of (opt ? opt.gpus : [])) {
    const o = document.createElement("option");
    o.value = g;
    o.textContent = g;  // device names are data: never innerHTML
    gpuSel.append(o);
  }
  // the GPU of the current view (the server resolved "cluster/host/GPU3" refs to a snapshot)
  const [snap, gpu] = (ref.value || "").split("/").slice(-2);
  if (gpuSel.dataset.selected && gpuSel.dataset.host === hostSel.value) gpuSel.value = gpuSel.dataset.selected;
  else if (snap === hostSel.value && gpu) gpuSel.value = gpu;
}

function sync(hostSel, gpuSel, ref) {
  ref.value = hostSel.value && gpuSel.value ? `${hostSel.value}/${gpuSel.value}` : "";
}

function go(src, dst, dstHost) {
  const q = new URLSearchParams();
  if (src) q.set("src", src);
  if (dst) q.set("dst", dst);
  else if (dstHost) q.set("dst_host", dstHost);
  window.location.href = `/path/?${q}`;
}

const pairs = [["src-host", "src-gpu", srcRef], ["dst-host", "dst-gpu", dstRef]];
for (const [h, g, ref] of pairs) {
  const hostSel = document.getElementById(h);
  const gpuSel = document.getElementById(g);
  if (!hostSel) continue;
  // a reference by host name ("cluster/host/GPU3") selects nothing here; keep it as typed
  const isIdRef = /^\d+\//.test(ref.value);
  fillGpus(hostSel, gpuSel, ref);
  if (!ref.value || isIdRef) sync(hostSel, gpuSel, ref);
  hostSel.addEventListener("change", () => { fillGpus(hostSel, gpuSel, ref); sync(hostSel, gpuSel, ref); });
  gpuSel.addEventListener("change", () => sync(hostSel, gpuSel, ref));
}
form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  go(srcRef.value, dstRef.value);
});

ready.then((plots) => {
  for (const id of ["fig-left", "fig-right"]) {
    const el = document.getElementById(id);
    if (!el || !plots.has(id)) continue;
    el.on("plotly_click", (ev) => {
      const gpu = clickedGpu(ev);
      if (!gpu) return;
      const ref = `${el.dataset.snapshot}/${gpu}`;
      const right = document.getElementById("fig-right");
      if (el.dataset.gpuClick === "src") go(ref, dstRef.value && dstRef.value !== srcRef.value ? dstRef.value : "",
        right && right.dataset.snapshot);
      else go(srcRef.value, ref);
    });
  }
});
