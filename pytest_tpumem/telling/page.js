(function(){
  'use strict';
  // The page's data (telling/html.py): the long tables' rows and each test's section, drawn here as
  // elements with text, never as markup, and only when shown.
  var node = document.getElementById('tpumem-data');
  var DATA = node ? JSON.parse(node.textContent) : {};
  var SVG = 'http://www.w3.org/2000/svg';
  var tests = DATA.tests || [], verdicts = DATA.verdicts || {}, chunks = [];
  function details(i){  // the i-th test's blocks, from the JSON block that holds them (read once)
    var k = Math.floor(i / DATA.sections);
    if (!chunks[k]){
      var held = document.getElementById('tpumem-sections-' + k);
      chunks[k] = held ? JSON.parse(held.textContent) : [];
    }
    return chunks[k][i - k * DATA.sections] || [];
  }

  function el(tag, text, cls){
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function draw(parent, tag, attrs, text){  // an SVG element
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function(k){ e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  }
  function verdictClass(v){ return verdicts[v] ? verdicts[v][1] : 'v-bad'; }

  // --- a test's section, from its blocks (telling/markup.py's Block) ------------------------------
  function table(header, numeric, rows){
    var t = el('table'), tr = el('tr');
    header.forEach(function(h, i){ tr.appendChild(el('th', h, numeric.indexOf(i) >= 0 ? 'n' : '')); });
    t.appendChild(el('thead')).appendChild(tr);
    var body = t.appendChild(el('tbody'));
    rows.forEach(function(r){
      var row = body.appendChild(el('tr'));
      r.forEach(function(c, i){ row.appendChild(el('td', c, numeric.indexOf(i) >= 0 ? 'n' : '')); });
    });
    return t;
  }
  function timeline(s){  // telling/svg.py's draw_timeline, from its timeline_spec
    var F = DATA.frame, W = F.width, L = F.left, PW = F.plot, T = F.top, h = s.height, bottom = h - F.bottom;
    var svg = document.createElementNS(SVG, 'svg');
    [['width', W], ['height', h], ['viewBox', '0 0 ' + W + ' ' + h], ['font-family', 'sans-serif'], ['font-size', '12']]
      .forEach(function(a){ svg.setAttribute(a[0], a[1]); });
    draw(svg, 'rect', {width: W, height: h, fill: 'white'});
    draw(svg, 'text', {x: L, y: 22, 'font-size': 14, 'font-weight': 'bold'}, s.title);
    draw(svg, 'text', {x: L, y: 38, fill: '#555'}, s.sub);
    s.grid.forEach(function(g){
      draw(svg, 'line', {x1: L, x2: L + PW, y1: g[0], y2: g[0], stroke: '#e5e5e5'});
      draw(svg, 'text', {x: L - 8, y: g[1], 'text-anchor': 'end'}, g[2]);
    });
    s.ticks.forEach(function(x, k){
      draw(svg, 'line', {x1: x, x2: x, y1: bottom, y2: bottom + 5, stroke: '#333'});
      draw(svg, 'text', {x: x, y: bottom + 20, 'text-anchor': 'middle'}, k ? 'run ' + k : 'baseline');
    });
    draw(svg, 'line', {x1: L, x2: L, y1: T, y2: bottom, stroke: '#333'});
    draw(svg, 'line', {x1: L, x2: L + PW, y1: bottom, y2: bottom, stroke: '#333'});
    draw(svg, 'text', {x: L + PW / 2, y: h - 12, 'text-anchor': 'middle'}, 'run of the checked code');
    draw(svg, 'text', {transform: 'translate(18,' + (T + bottom) / 2 + ') rotate(-90)', 'text-anchor': 'middle'},
         'growth since the baseline (decimal units)');
    draw(svg, 'polyline', {'class': 'threshold', points: s.threshold, fill: 'none', stroke: '#000',
                           'stroke-width': '1.5', 'stroke-dasharray': '6,4'});
    s.series.forEach(function(one){  // [name, color, width, dotted, points], the last on top
      var a = {'class': 'series', 'data-name': one[0], points: one[4], fill: 'none', stroke: one[1], 'stroke-width': one[2]};
      if (one[3]) a['stroke-dasharray'] = '2,2';
      draw(svg, 'polyline', a);
      one[4].split(' ').forEach(function(p){
        var xy = p.split(',');
        draw(svg, 'circle', {cx: xy[0], cy: xy[1], r: 3, fill: one[1]});
      });
    });
    var right = L + PW, ly = T + 10;
    s.legend.forEach(function(e){  // [swatch or null (a second line), label, dashed]
      if (e[0] === null){
        draw(svg, 'text', {x: right + 46, y: ly - 4, fill: '#555', 'font-size': 11}, e[1]);
        ly += 10;
        return;
      }
      var a = {x1: right + 15, x2: right + 40, y1: ly, y2: ly, stroke: e[0], 'stroke-width': 2};
      if (e[2]) a['stroke-dasharray'] = '6,4';
      draw(svg, 'line', a);
      draw(svg, 'text', {x: right + 46, y: ly + 4}, e[1]);
      ly += 20;
    });
    var div = el('div', null, 'picture timeline');
    div.appendChild(svg);
    return div;
  }
  function block(b, into){
    if (b[0] === 'table'){
      if (b[1]) into.appendChild(el('h3', b[1]));
      into.appendChild(table(b[2], b[3], b[4]));
    } else if (b[0] === 'timeline'){
      into.appendChild(timeline(b[1]));
    } else if (b[0] === 'h3' || b[0] === 'p' || b[0] === 'pre'){
      into.appendChild(el(b[0], b[1]));
    }
  }
  var sections = document.getElementById('sections'), made = [];
  function section(i){  // the <details> of the i-th test (worst first), drawn once; a failed test's open
    if (made[i]) return made[i];
    var row = tests[i], d = el('details', null, 'test'), summary = el('summary');
    d.id = 't' + i;
    summary.appendChild(el('span', row[1], verdictClass(row[1])));
    summary.appendChild(document.createTextNode(' ' + row[0]));
    d.appendChild(summary);
    var body = document.createDocumentFragment();
    details(i).forEach(function(b){ block(b, body); });
    d.appendChild(body);
    if (row[9]) d.open = true;
    made[i] = d;
    return d;
  }
  function openSection(i){
    if (!sections || !(i >= 0 && i < tests.length)) return;
    var d = section(i);
    if (!d.isConnected) sections.appendChild(d);
    d.open = true;
    d.scrollIntoView();
  }
  if (sections){
    var first = document.createDocumentFragment();
    for (var i = 0; i < Math.min(tests.length, DATA.sections); i++) first.appendChild(section(i));
    sections.appendChild(first);
  }

  // --- the long tables: sorted and filtered on their data, a page of rows drawn at a time ---------
  function numCell(c){
    var td = el('td', c[1], 'n');
    td.setAttribute('data-value', c[0] === null ? '' : String(c[0]));
    return td;
  }
  function textKey(t){ return t.toLowerCase(); }
  function numKey(c){ return c[0] === null ? -Infinity : c[0]; }
  function Table(id, rows, rowOf, keyOf, said){
    var t = document.getElementById(id);
    if (!t) return null;
    var body = t.tBodies[0], heads = t.tHead.rows[0].cells;
    var more = document.querySelector('button[data-for="' + id + '"]');
    var order = rows.map(function(_, i){ return i; }), keep = null, shown = order, limit = DATA.rows, drawn = [];
    var listed = [];  // the rows in the body now
    function render(){
      var n = Math.min(limit, shown.length), f = document.createDocumentFragment();
      var same = n === listed.length;
      for (var k = 0; same && k < n; k++) same = listed[k] === shown[k];
      if (!same){  // each row made once, kept for the next time it is listed
        for (var j = 0; j < n; j++) f.appendChild(drawn[shown[j]] || (drawn[shown[j]] = rowOf(rows[shown[j]], shown[j])));
        body.textContent = '';
        body.appendChild(f);
        listed = shown.slice(0, n);
      }
      if (more){
        more.parentNode.hidden = n >= shown.length;
        more.textContent = 'show ' + Math.min(DATA.rows, shown.length - n) + ' more (' + (shown.length - n) + ' not listed)';
      }
      if (said) said(shown.length, n);
    }
    function refilter(){ shown = keep ? order.filter(keep) : order; limit = DATA.rows; render(); }
    Array.prototype.forEach.call(heads, function(th, col){
      th.addEventListener('click', function(){
        var numeric = th.classList.contains('n');
        var dir = th.getAttribute('aria-sort') === 'descending' ? 'ascending' : 'descending';
        if (!numeric && !th.hasAttribute('aria-sort')) dir = 'ascending';
        Array.prototype.forEach.call(heads, function(h){ h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', dir);
        var keys = rows.map(function(r){ return keyOf(r, col); }), sign = dir === 'ascending' ? 1 : -1;
        order = order.slice().sort(function(a, b){  // stable: equal keys keep the order they had
          var x = keys[a], y = keys[b];
          return sign * (x < y ? -1 : x > y ? 1 : 0);
        });
        refilter();
      });
    });
    if (more) more.addEventListener('click', function(){ limit += DATA.rows; render(); });
    render();
    return {filter: function(f){ keep = f; refilter(); }};
  }

  function testRow(r, i){
    var tr = el('tr'), td = el('td', null, 'id'), a = el('a', r[0]);
    tr.setAttribute('data-test', r[0]);
    tr.setAttribute('data-verdict', r[1]);
    a.href = '#t' + i;
    td.appendChild(a);
    tr.appendChild(td);
    td = tr.appendChild(el('td', r[1], verdictClass(r[1])));
    td.setAttribute('data-value', verdicts[r[1]] ? verdicts[r[1]][0] : '');
    tr.appendChild(el('td', r[2]));
    for (var c = 3; c < 8; c++) tr.appendChild(numCell(r[c]));
    tr.appendChild(el('td', r[8]));
    return tr;
  }
  function testKey(r, col){
    if (col === 1) return verdicts[r[1]] ? verdicts[r[1]][0] : Infinity;
    return col >= 3 && col < 8 ? numKey(r[col]) : textKey(r[col]);
  }
  var shownText = document.getElementById('shown');
  var testsTable = Table('tests', tests, testRow, testKey, function(matched, listed){
    if (!shownText) return;
    shownText.textContent = matched + ' of ' + tests.length + ' shown' +
      (listed < matched ? ' (the first ' + listed + ' listed)' : '');
  });
  var lowered = tests.map(function(r){ return r[0].toLowerCase(); });
  var text = document.getElementById('filter'), verdict = document.getElementById('verdict');
  function filter(){
    var t = text.value.toLowerCase(), v = verdict.value;
    testsTable.filter(!t && !v ? null : function(i){
      return (!t || lowered[i].indexOf(t) >= 0) && (!v || tests[i][1] === v);
    });
  }
  if (testsTable && text && verdict){ text.addEventListener('input', filter); verdict.addEventListener('change', filter); }
  var tbody = document.querySelector('#tests tbody');
  if (tbody) tbody.addEventListener('click', function(e){  // a test's link opens its section, drawn if it is not yet
    var a = e.target.closest && e.target.closest('a');
    if (a) openSection(Number(a.getAttribute('href').slice(2)));
  });

  var ledger = DATA.ledger || [];
  Table('ledger-tests', ledger, function(r){
    var tr = el('tr');
    tr.appendChild(el('td', r[0], 'id'));
    tr.appendChild(el('td', r[1]));
    for (var c = 2; c < 6; c++) tr.appendChild(numCell(r[c]));
    tr.appendChild(el('td', r[6]));
    return tr;
  }, function(r, col){ return col >= 2 && col < 6 ? numKey(r[col]) : textKey(r[col]); });

  function openTarget(){  // #t12: that test's section, opened
    var m = /^#t(\d+)$/.exec(location.hash);
    if (m) openSection(Number(m[1]));
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
})();
