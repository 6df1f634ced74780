// The review page's charts: each div.review-chart is drawn from the JSON the page put beside it
// (json_script; the figures are incidents/review/charts.py's), so the page carries no script the
// Content-Security-Policy would refuse. Colours are the stylesheet's: a trace's meta.colour and
// a shape's name say which --chart-* variable, and the text, grid and hover boxes take the
// page's own, so the charts follow the light or dark theme, redrawn when the system switches.
(function () {
  "use strict";

  var charts = Array.prototype.slice.call(document.querySelectorAll("div.review-chart[data-figure]"));
  if (!charts.length || !window.Plotly) return;
  var config = {responsive: true, displaylogo: false, displayModeBar: false, scrollZoom: false};

  function colour(name, fallback) {
    var value = getComputedStyle(document.documentElement).getPropertyValue("--" + name).trim();
    return value || fallback;
  }

  function merged(base, more) {
    return Object.assign({}, base || {}, more);
  }

  function axis(given) {
    var out = merged(given, {
      gridcolor: colour("line", "#ccc"),
      linecolor: colour("line", "#ccc"),
      zerolinecolor: colour("line", "#ccc"),
      tickfont: merged(given && given.tickfont, {color: colour("muted", "#555")})
    });
    if (given && given.title) out.title = merged(given.title, {font: {color: colour("muted", "#555")}});
    return out;
  }

  function themed(figure) {
    var data = figure.data.map(function (trace) {
      var name = trace.meta && trace.meta.colour;
      if (!name) return trace;
      var paint = colour("chart-" + name, "#888");
      var copy = merged(trace, {marker: merged(trace.marker, {color: paint})});
      if (trace.type === "scatter") copy.line = merged(trace.line, {color: paint, width: 2});
      return copy;
    });
    var layout = figure.layout;
    var text = colour("fg", "#222");
    return {
      data: data,
      layout: merged(layout, {
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "rgba(0,0,0,0)",
        font: merged(layout.font, {color: text, family: getComputedStyle(document.body).fontFamily}),
        xaxis: axis(layout.xaxis),
        yaxis: axis(layout.yaxis),
        legend: merged(layout.legend, {font: {color: text}}),
        hoverlabel: {bgcolor: colour("surface", "#fff"), bordercolor: colour("line", "#ccc"), font: {color: text}},
        shapes: (layout.shapes || []).map(function (shape) {
          var paint = colour("chart-" + shape.name, "#888");
          if (shape.type === "rect") return merged(shape, {fillcolor: paint});
          return merged(shape, {line: merged(shape.line, {color: paint})});
        })
      })
    };
  }

  function draw() {
    charts.forEach(function (div) {
      var source = document.getElementById(div.getAttribute("data-figure"));
      if (!source) return;
      var figure = themed(JSON.parse(source.textContent));
      Plotly.react(div, figure.data, figure.layout, config);
    });
  }

  draw();
  var scheme = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)");
  if (scheme && scheme.addEventListener) scheme.addEventListener("change", draw);
})();
