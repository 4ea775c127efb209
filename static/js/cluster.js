// Cluster page: filter and sort the host table in the browser.
const table = document.getElementById("hosts");
if (table) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const text = rows.map((r) => r.textContent.toLowerCase());
  const filter = document.getElementById("host-filter");
  const onlyOdd = document.getElementById("only-odd");
  const onlyBad = document.getElementById("only-findings");
  const count = document.getElementById("host-count");

  function apply() {
    const q = filter.value.trim().toLowerCase();
    let shown = 0;
    rows.forEach((r, i) => {
      const ok = (!q || text[i].includes(q)) && (!onlyOdd.checked || r.dataset.odd === "1")
        && (!onlyBad.checked || r.dataset.bad === "1");
      r.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = `${shown} of ${rows.length} hosts`;
  }
  [filter, onlyOdd, onlyBad].forEach((el) => el.addEventListener("input", apply));
  apply();

  table.tHead.querySelectorAll("th[data-sort]").forEach((th, col) => {
    th.classList.add("sort-head");
    th.tabIndex = 0;
    const sort = () => {
      const dir = th.dataset.dir === "asc" ? "desc" : "asc";
      table.tHead.querySelectorAll("th").forEach((x) => delete x.dataset.dir);
      th.dataset.dir = dir;
      const num = th.dataset.sort === "num";
      const key = (r) => { const c = r.cells[col]; const v = c.dataset.v ?? c.textContent.trim(); return num ? Number(v) : v.toLowerCase(); };
      const sorted = rows.slice().sort((a, b) => {
        const x = key(a); const y = key(b);
        const c = num ? x - y : x.localeCompare(y, undefined, { numeric: true });
        return dir === "asc" ? c : -c;
      });
      body.append(...sorted);
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
  });
}
