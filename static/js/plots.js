// Render every figure embedded by the server (<script type="application/json" data-figure="TARGET">) with Plotly.
// The page paints first; then the figures are drawn one at a time in page order (the main drawing
// first), yielding a frame between them so the page answers clicks and scrolls meanwhile. Each
// drawing is timed as a performance measure "plot <id>".
// No cloud buttons ("Share chart...", "Edit in Chart Studio"): sites running topoweb are often air-gapped,
// and their figures must not be offered for upload (Plotly.js 4 shows the share button by default).
const CONFIG = { responsive: true, displaylogo: false, scrollZoom: true, showSendToCloud: false,
  showEditInChartStudio: false,
  modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines", "sendChartToCloud"] };

export const plots = new Map();

const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

async function draw(script) {
  const el = document.getElementById(script.dataset.figure);
  if (!el) return;
  const start = performance.now();
  const fig = JSON.parse(script.textContent);
  const gd = await Plotly.newPlot(el, fig.data, fig.layout, CONFIG);
  plots.set(el.id, gd);
  performance.measure(`plot ${el.id}`, { start, end: performance.now() });
}

async function renderAll() {
  const scripts = Array.from(document.querySelectorAll("script[type='application/json'][data-figure]"));
  for (const s of scripts) {
    await nextFrame();
    await draw(s);
  }
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
