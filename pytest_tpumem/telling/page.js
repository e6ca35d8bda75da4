(function(){
  function key(cell, numeric){
    var v = cell.getAttribute('data-value');
    if (v === null) v = cell.textContent;
    if (!numeric) return v.toLowerCase();
    return v === '' ? -Infinity : Number(v);
  }
  document.querySelectorAll('table.sortable').forEach(function(table){
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function(th, col){
      th.addEventListener('click', function(){
        var numeric = th.classList.contains('n');
        var dir = th.getAttribute('aria-sort') === 'descending' ? 'ascending' : 'descending';
        if (!numeric && !th.hasAttribute('aria-sort')) dir = 'ascending';
        Array.prototype.forEach.call(heads, function(h){ h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', dir);
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function(a, b){
          var x = key(a.cells[col], numeric), y = key(b.cells[col], numeric);
          var c = x < y ? -1 : x > y ? 1 : 0;
          return dir === 'ascending' ? c : -c;
        });
        rows.forEach(function(r){ body.appendChild(r); });
      });
    });
  });
  var text = document.getElementById('filter'), verdict = document.getElementById('verdict');
  function filter(){
    var t = text.value.toLowerCase(), v = verdict.value, shown = 0;
    var rows = document.querySelectorAll('#tests tbody tr');
    rows.forEach(function(r){
      var ok = (!t || r.getAttribute('data-test').toLowerCase().indexOf(t) >= 0) &&
               (!v || r.getAttribute('data-verdict') === v);
      r.hidden = !ok; if (ok) shown++;
    });
    document.getElementById('shown').textContent = shown + ' of ' + rows.length + ' shown';
  }
  if (text && verdict){ text.addEventListener('input', filter); verdict.addEventListener('change', filter); filter(); }
  function openTarget(){  // a test's link opens its section
    var id = location.hash.slice(1), d = id && document.getElementById(id);
    if (d && d.tagName === 'DETAILS') d.open = true;
  }
  window.addEventListener('hashchange', openTarget); openTarget();
})();
