// Paste page: show which command outputs were recognised while typing; add more boxes.
const detected = document.getElementById("detected");
const boxes = document.getElementById("boxes");
const csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
let timer = null;

async function detect() {
  const areas = Array.from(boxes.querySelectorAll("textarea"));
  detected.replaceChildren();
  for (const [i, area] of areas.entries()) {
    if (!area.value.trim()) continue;
    const body = new URLSearchParams({ text: area.value });
    const resp = await fetch("/paste/detect/", { method: "POST", body, headers: { "X-CSRFToken": csrf } });
    if (!resp.ok) continue;
    const { sections } = await resp.json();
    for (const s of sections) {
      const row = document.createElement("div");
      row.className = s.error ? "det det-bad" : "det det-ok";
      const where = areas.length > 1 ? `box ${i + 1}, ` : "";
      row.textContent = s.error
        ? `${where}lines ${s.first_line}-${s.first_line + s.line_count - 1}: ${s.error}`
        : `${where}lines ${s.first_line}-${s.first_line + s.line_count - 1}: ${s.kind} (${s.command})`;
      detected.append(row);
    }
  }
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(detect, 400);
}

boxes.addEventListener("input", schedule);
document.getElementById("add-box").addEventListener("click", () => {
  const area = document.createElement("textarea");
  area.name = "text";
  area.rows = 10;
  area.spellcheck = false;
  area.placeholder = "another command output";
  boxes.append(area);
  area.focus();
});
schedule();
