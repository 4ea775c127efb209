// What-if edit rows: one row per edit (op selector + its fields), kept in step with the JSON textarea.
const box = document.getElementById("plan-edits");
const rows = document.getElementById("plan-rows");
const vocab = JSON.parse(document.getElementById("plan-vocab").textContent);
const NUMBERS = new Set(["rate_gbit", "gen", "width"]);
const CHOICES = {
  near: vocab.gpus, state: ["Active", "Down"], link_layer: ["InfiniBand", "Ethernet"],
};

function parse() {
  try {
    const v = JSON.parse(box.value || "[]");
    return Array.isArray(v) ? v : null;
  } catch (e) {
    return null;
  }
}

function input(field, value, op) {
  let choices = CHOICES[field];
  if (field === "name" && op === "set_env") choices = vocab.env_names;
  if (field === "name" && ["move_nic", "set_nic", "remove"].includes(op)) choices = vocab.nics.concat(vocab.gpus);
  if (field === "device") choices = vocab.gpus.concat(vocab.nics);
  const el = document.createElement("input");
  el.type = NUMBERS.has(field) ? "number" : "text";
  el.placeholder = field;
  el.dataset.field = field;
  el.value = value ?? "";
  if (choices && choices.length) {
    const id = `plan-list-${field}-${op}`;
    if (!document.getElementById(id)) {
      const list = document.createElement("datalist");
      list.id = id;
      for (const c of choices) list.append(new Option(c));
      document.body.append(list);
    }
    el.setAttribute("list", id);
  }
  return el;
}

function row(edit) {
  const div = document.createElement("div");
  div.className = "plan-row";
  const op = document.createElement("select");
  for (const name of Object.keys(vocab.ops)) op.append(new Option(name, name, false, name === edit.op));
  div.append(op);
  for (const f of vocab.ops[edit.op] || []) div.append(input(f, edit[f], edit.op));
  const drop = document.createElement("button");
  drop.type = "button";
  drop.textContent = "remove";
  drop.addEventListener("click", () => { div.remove(); write(); });
  div.append(drop);
  op.addEventListener("change", () => { div.replaceWith(row({ op: op.value })); write(); });
  div.addEventListener("input", write);
  return div;
}

function write() {
  const edits = [...rows.querySelectorAll(".plan-row")].map((div) => {
    const edit = { op: div.querySelector("select").value };
    for (const el of div.querySelectorAll("input[data-field]")) {
      if (el.value === "") continue;
      edit[el.dataset.field] = NUMBERS.has(el.dataset.field) ? Number(el.value) : el.value;
    }
    return edit;
  });
  box.value = JSON.stringify(edits, null, 1);
}

function draw() {
  const edits = parse();
  if (edits === null) return; // not a list: the textarea alone
  rows.replaceChildren(...edits.map((e) => row(e && vocab.ops[e.op] ? e : { op: "set_nic" })));
  rows.hidden = false;
  document.getElementById("plan-rows-tools").hidden = false;
}

document.getElementById("plan-add-row").addEventListener("click", () => {
  rows.append(row({ op: "add_nic" }));
  write();
});
box.addEventListener("change", draw);
draw();
