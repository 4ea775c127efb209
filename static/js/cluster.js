// Cluster page: the host table is filtered, sorted and paged by the server (the query string);
// changing a select or the checkbox submits the filter form (the name filter on Enter).
const form = document.getElementById("host-query");
if (form) {
  form.querySelectorAll("select, input[type=checkbox]").forEach((el) => el.addEventListener("change", () => form.requestSubmit()));
}
