// Path page: pick GPUs from the selectors or by clicking GPU markers; the URL holds the whole view.
// The server sends every host as [snapshot id, "cluster/host", GPU count] and the GPU names of the
// hosts on show only; another host's GPU names are fetched when it is picked.
import { ready, clickedGpu } from "./plots.js";

const data = JSON.parse(document.getElementById("path-pickers").textContent);
const gpuNames = new Map(Object.entries(data.gpus || {}));
const form = document.getElementById("path-form");
const srcRef = document.getElementById("src-ref");
const dstRef = document.getElementById("dst-ref");

function fillHosts(hostSel) {
  // the server rendered the host of the view (selected); add every host around it, in order
  const current = hostSel.value;
  const frag = document.createDocumentFragment();
  let seen = false;
  for (const [id, label, count] of data.options) {
    const o = document.createElement("option");
    o.value = String(id);
    o.textContent = label;  // host names are data: never innerHTML
    if (!count) o.textContent += " (no GPU)";
    if (String(id) === current) { o.selected = true; seen = true; }
    frag.append(o);
  }
  // an older snapshot of the address is not among the newest ones: keep the server's option first
  const keep = current && !seen ? [...hostSel.options] : [];
  hostSel.replaceChildren(...keep, frag);
  if (current) hostSel.value = current;
}

async function namesOf(id) {
  if (!id) return [];
  if (!gpuNames.has(id)) {
    const resp = await fetch(`/path/gpus/${encodeURIComponent(id)}/`, { headers: { Accept: "application/json" } });
    gpuNames.set(id, resp.ok ? (await resp.json()).gpus : []);
  }
  return gpuNames.get(id);
}

async function fillGpus(hostSel, gpuSel, ref) {
  const id = hostSel.value;
  const names = await namesOf(id);
  if (hostSel.value !== id) return;  // another host was picked meanwhile
  gpuSel.replaceChildren();
  for (const g of names) {
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
const filled = [];
for (const [h, g, ref] of pairs) {
  const hostSel = document.getElementById(h);
  const gpuSel = document.getElementById(g);
  if (!hostSel) continue;
  fillHosts(hostSel);
  // a reference by host name ("cluster/host/GPU3") selects nothing here; keep it as typed
  const isIdRef = /^\d+\//.test(ref.value);
  filled.push(fillGpus(hostSel, gpuSel, ref).then(() => { if (!ref.value || isIdRef) sync(hostSel, gpuSel, ref); }));
  hostSel.addEventListener("change", async () => { await fillGpus(hostSel, gpuSel, ref); sync(hostSel, gpuSel, ref); });
  gpuSel.addEventListener("change", () => sync(hostSel, gpuSel, ref));
}
form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  await Promise.all(filled);
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
