// Fabric page: a click on a host opens its host page; a click on a group (or a group's hosts) draws it
// member by member (?expand=ID). Markers carry customdata [action, target] (apps/explorer/fabric_figures.py).
import { ready } from "./plots.js";

ready.then((plots) => {
  const el = document.getElementById("fig-fabric");
  if (!el || !plots.has("fig-fabric")) return;
  el.on("plotly_click", (ev) => {
    const p = ev && ev.points && ev.points[0];
    const [action, target] = (p && p.customdata) || [];
    if (!target) return;
    if (action === "host" && target.startsWith("/")) {
      window.location.href = target;
    } else if (action === "expand") {
      const url = new URL(window.location.href);
      url.searchParams.set("expand", target);
      window.location.href = url.toString();
    }
  });
});
