"use strict";
// Sort a table.sortable by the clicked column: numbers by each cell's data-v, text otherwise.
(function () {
  function key(cell) {
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.trim() : Number(v);
  }
  function compare(x, y) {
    if (x === y) return 0;
    if (typeof x === "number" && typeof y === "number") return x < y ? -1 : 1;
    return String(x).localeCompare(String(y));
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      function sort() {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var c = compare(key(a.cells[col]), key(b.cells[col]));
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
    });
  });
})();
