// Render every figure embedded by the server (<script type="application/json" data-figure="TARGET">) with Plotly.
const CONFIG = { responsive: true, displaylogo: false, scrollZoom: true,
  modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"] };

export const plots = new Map();

async function renderAll() {
  const scripts = document.querySelectorAll("script[type='application/json'][data-figure]");
  const jobs = [];
  for (const s of scripts) {
    const el = document.getElementById(s.dataset.figure);
    if (!el) continue;
    const fig = JSON.parse(s.textContent);
    jobs.push(Plotly.newPlot(el, fig.data, fig.layout, CONFIG).then((gd) => plots.set(el.id, gd)));
  }
  await Promise.all(jobs);
  document.body.dataset.plotsReady = "1";
  return plots;
}

export const ready = renderAll();

// Copy buttons: <button data-copy="ELEMENT_ID"> copies that element's text.
for (const b of document.querySelectorAll("button[data-copy]")) {
  b.addEventListener("click", async () => {
    const text = document.getElementById(b.dataset.copy).textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const range = document.createRange();
      range.selectNodeContents(document.getElementById(b.dataset.copy));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      document.execCommand("copy");
    }
    b.textContent = "Copied";
    setTimeout(() => { b.textContent = "Copy"; }, 1500);
  });
}

// The GPU a click landed on, or null: traces carry customdata [kind, id].
export function clickedGpu(event) {
  const p = event && event.points && event.points[0];
  if (!p || !p.customdata || p.customdata[0] !== "gpu") return null;
  return p.customdata[1];
}
