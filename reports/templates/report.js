(function () {
  "use strict";
  // Sort the case table by a clicked header (again: reverse) and filter its rows by text.
  // Cells sort by their data-sort attribute when present (numbers), else by their text.
  var table = document.getElementById("cases");
  if (!table || !table.tHead || !table.tBodies.length) {
    document.body.setAttribute("data-sort-ready", "no-table");
    return;
  }
  var tbody = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;

  function key(cell, numeric) {
    var v = cell.getAttribute("data-sort");
    if (v === null) { v = cell.textContent.trim(); }
    if (numeric) {
      var f = parseFloat(v);
      return isNaN(f) ? null : f;
    }
    return v.toLowerCase();
  }

  function sortBy(col, th) {
    var numeric = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(tbody.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col], numeric), y = key(b.cells[col], numeric);
      if (x === y) { return 0; }
      if (x === null) { return 1; }  // unknown values last, whatever the direction
      if (y === null) { return -1; }
      return (x < y ? -1 : 1) * dir;
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
  }

  Array.prototype.forEach.call(heads, function (th, col) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(col, th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(col, th); }
    });
  });

  var filter = document.getElementById("case-filter");
  var shown = document.getElementById("case-count");
  if (filter) {
    filter.addEventListener("input", function () {
      var q = filter.value.trim().toLowerCase(), n = 0;
      Array.prototype.forEach.call(tbody.rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
        if (!r.hidden) { n++; }
      });
      if (shown) { shown.textContent = String(n); }
    });
  }
  // report.html?sort=median&dir=desc opens the table sorted (keys: the headers' data-key)
  var want = /[?&]sort=([^&#]+)/.exec(window.location.search);
  if (want) {
    var name = decodeURIComponent(want[1]).toLowerCase();
    Array.prototype.forEach.call(heads, function (th, col) {
      if (th.getAttribute("data-key") === name) {
        sortBy(col, th);
        if (/[?&]dir=desc/.test(window.location.search)) { sortBy(col, th); }
        document.body.setAttribute("data-sorted-by", name);
      }
    });
  }
  document.body.setAttribute("data-sort-ready", "1");
})();
