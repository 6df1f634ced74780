// The evidence page's charts: each div.chart is drawn from the JSON the page put beside it
// (json_script), so the page itself carries no script the Content-Security-Policy would refuse.
document.querySelectorAll("div.chart").forEach(function (div) {
  var figure = JSON.parse(document.getElementById(div.id + "-data").textContent);
  Plotly.newPlot(div, figure.data, figure.layout, {responsive: true, displaylogo: false});
});
