// The month's cost as a chart: one bar per day, stacked by model, with the month's total
// against its limit. Drawn as SVG from the daemon's cost report; nothing is fetched elsewhere.
"use strict";

const COSTS_REFRESH_MS = 30000;
const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#14b8a6", "#e11d48"];
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attributes) {
  const made = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) made.setAttribute(name, value);
  return made;
}

function cents(value) {
  return value >= 100 ? `$${(value / 100).toFixed(2)}` : `${value.toFixed(2)}¢`;
}

// Each model's colour, in the order models first spent.
function colours(models) {
  const byModel = new Map();
  for (const spent of models) {
    if (!byModel.has(spent.model)) byModel.set(spent.model, PALETTE[byModel.size % PALETTE.length]);
  }
  return byModel;
}

function drawChart(report) {
  const [year, month] = report.month.key.split("-").map(Number);
  const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const perDay = new Map();
  for (const spent of report.models) {
    const day = Number(spent.day.slice(8, 10));
    perDay.set(day, [...(perDay.get(day) || []), spent]);
  }
  const highest = Math.max(0, ...[...perDay.values()].map((s) => s.reduce((t, m) => t + m.cost_cents, 0)));
  const [width, height, slot] = [days * 10, 100, 10];
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 12}`, role: "img", id: "cost-chart" });
  chart.append(svg("title", {}));
  chart.firstChild.textContent = `Spending per day in ${report.month.key}, by model`;
  chart.append(svg("line", { x1: 0, y1: height, x2: width, y2: height, stroke: "#888", "stroke-width": 0.5 }));
  const colour = colours(report.models);
  for (const [day, spent] of perDay) {
    let top = height;
    for (const part of spent) {
      const tall = highest > 0 ? (part.cost_cents / highest) * (height - 4) : 0;
      top -= tall;
      const bar = svg("rect", {
        x: (day - 1) * slot + 1, y: top, width: slot - 2, height: Math.max(tall, 0.5),
        fill: colour.get(part.model),
      });
      bar.append(svg("title", {}));
      bar.firstChild.textContent = `${part.day} ${part.model}: ${cents(part.cost_cents)}, ${part.calls} calls`;
      chart.append(bar);
    }
  }
  for (const day of [1, 8, 15, 22, 29].filter((d) => d <= days)) {
    const label = svg("text", { x: (day - 1) * slot + slot / 2, y: height + 10, "font-size": 7, "text-anchor": "middle", fill: "currentColor" });
    label.textContent = String(day);
    chart.append(label);
  }
  return { chart, colour };
}

function showCosts(report) {
  const { chart, colour } = drawChart(report);
  document.getElementById("cost-chart").replaceWith(chart);
  const limit = report.monthly_limit_cents;
  const meter = document.getElementById("cost-meter");
  meter.hidden = limit === 0;
  meter.max = limit || 1;
  meter.value = report.month.cost_cents;
  if (report.warning_threshold_cents) meter.high = report.warning_threshold_cents;
  const total = `${report.month.key}: ${cents(report.month.cost_cents)} in ${report.month.calls} calls`;
  const limits = [
    limit ? `limit ${cents(limit)} a month` : "no monthly limit",
    report.warning_threshold_cents ? `warning at ${cents(report.warning_threshold_cents)}` : null,
    report.per_run_limit_cents ? `${cents(report.per_run_limit_cents)} a run` : null,
    report.refused_until ? `new runs refused until ${report.refused_until}` : null,
  ].filter(Boolean);
  document.getElementById("cost-total").textContent = `${total} · ${limits.join(" · ")}`;
  const legend = document.getElementById("cost-legend");
  legend.replaceChildren(...[...colour].map(([model, fill]) => {
    const item = document.createElement("li");
    const swatch = svg("svg", { width: 12, height: 12, "aria-hidden": "true" });
    swatch.append(svg("rect", { width: 12, height: 12, fill }));
    const spent = report.models.filter((m) => m.model === model).reduce((t, m) => t + m.cost_cents, 0);
    item.append(swatch, document.createTextNode(` ${model}: ${cents(spent)}`));
    return item;
  }));
}

async function refreshCosts() {
  try {
    showCosts(await api("/api/costs"));
  } catch (e) {
    problem(e);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  refreshCosts();
  setInterval(refreshCosts, COSTS_REFRESH_MS);
});
