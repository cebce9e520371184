import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * SVG charts of the offered-load and scaling benchmarks, drawn from a bench report with no
 * library and no service: `tsx bench/lib/chart.ts <report.json> <dir>` (or `bench/run.ts
 * --charts <dir>`) writes `offered-load.svg` and `scaling.svg` when the report has them.
 */

interface Series {
  name: string;
  color: string;
  points: Array<[number, number]>;
  dashed?: boolean;
}

interface Panel {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  xLog?: boolean;
  yLog?: boolean;
}

const W = 720;
const PANEL_H = 300;
const M = { left: 70, right: 20, top: 40, bottom: 50 };

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function niceTicks(min: number, max: number, count = 5): number[] {
  if (max <= min) max = min + 1;
  const raw = (max - min) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw) ?? raw;
  const ticks: number[] = [];
  for (let v = Math.floor(min / step) * step; v <= max + step / 2; v += step)
    ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const f of [1, 2, 5]) {
      const v = f * 10 ** e;
      if (v >= min / 1.001 && v <= max * 1.001) ticks.push(v);
    }
  }
  return ticks;
}

const fmt = (v: number) =>
  v >= 1000 ? `${Number((v / 1000).toPrecision(3))}k` : String(Number(v.toPrecision(3)));

function panel(p: Panel, top: number): string {
  const all = p.series.flatMap((s) => s.points);
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y).filter((y) => Number.isFinite(y));
  const x0 = p.xLog ? Math.min(...xs) : 0;
  const x1 = Math.max(...xs);
  const y0 = p.yLog ? Math.max(Math.min(...ys), 1e-3) : 0;
  const y1 = Math.max(...ys) * 1.08;
  // The measured x values are the ticks: rates and worker counts are few and chosen.
  const xTicks = xs.filter((v, i) => xs.indexOf(v) === i).sort((a, b) => a - b);
  const yTicks = p.yLog ? logTicks(y0, y1) : niceTicks(y0, y1);
  const xMax = x1;
  const yMax = p.yLog ? y1 : Math.max(y1, yTicks.at(-1)!);
  const w = W - M.left - M.right;
  const h = PANEL_H - M.top - M.bottom;
  const sx = (x: number) =>
    M.left + (p.xLog ? (Math.log(x / x0) / Math.log(xMax / x0 || 2)) * w : ((x - x0) / (xMax - x0 || 1)) * w);
  const sy = (y: number) =>
    top +
    M.top +
    h -
    (p.yLog ? (Math.log(y / y0) / Math.log(yMax / y0 || 2)) * h : ((y - y0) / (yMax - y0 || 1)) * h);
  const out: string[] = [];
  out.push(`<text x="${M.left}" y="${top + 24}" font-size="15" font-weight="bold">${esc(p.title)}</text>`);
  for (const t of yTicks) {
    const y = sy(t).toFixed(1);
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(
      `<text x="${M.left - 6}" y="${y}" font-size="11" text-anchor="end" dominant-baseline="middle">${fmt(t)}</text>`,
    );
  }
  for (const t of xTicks) {
    const x = sx(t).toFixed(1);
    out.push(`<line x1="${x}" x2="${x}" y1="${top + M.top}" y2="${top + M.top + h}" stroke="#f0f0f0"/>`);
    out.push(
      `<text x="${x}" y="${top + M.top + h + 16}" font-size="11" text-anchor="middle">${fmt(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${M.left}" y="${top + M.top}" width="${w}" height="${h}" fill="none" stroke="#888"/>`,
    `<text x="${M.left + w / 2}" y="${top + PANEL_H - 10}" font-size="12" text-anchor="middle">${esc(p.xLabel)}</text>`,
    `<text x="16" y="${top + M.top + h / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 16 ${top + M.top + h / 2})">${esc(p.yLabel)}</text>`,
  );
  p.series.forEach((s, i) => {
    const pts = s.points
      .filter(([, y]) => Number.isFinite(y))
      .map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`);
    out.push(
      `<polyline points="${pts.join(' ')}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
    );
    if (!s.dashed)
      for (const pt of pts)
        out.push(`<circle cx="${pt.split(',')[0]}" cy="${pt.split(',')[1]}" r="3" fill="${s.color}"/>`);
    const ly = top + M.top + 14 + i * 16;
    out.push(
      `<line x1="${M.left + 10}" x2="${M.left + 34}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
      `<text x="${M.left + 40}" y="${ly}" font-size="11" dominant-baseline="middle">${esc(s.name)}</text>`,
    );
  });
  return out.join('\n');
}

export function renderChart(title: string, note: string, panels: Panel[]): string {
  const height = 50 + panels.length * PANEL_H;
  const body = panels.map((p, i) => panel(p, 40 + i * PANEL_H)).join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${M.left}" y="22" font-size="17" font-weight="bold">${esc(title)}</text>`,
    `<text x="${M.left}" y="40" font-size="11" fill="#555">${esc(note)}</text>`,
    body,
    '</svg>',
    '',
  ].join('\n');
}

interface OfferedPoints {
  points: Array<{ offered: number; answeredPerSec: number; replyP99Ms: number; replyP50Ms: number }>;
}
interface ScalingMedians {
  median: Record<string, { turnsPerSec: number; idealTurnsPerSec: number }>;
}

export function offeredLoadChart(r: OfferedPoints, note: string): string {
  const pts = [...r.points].sort((a, b) => a.offered - b.offered);
  return renderChart('Throughput and reply latency against offered load', note, [
    {
      title: 'answered messages/s',
      xLabel: 'offered load (messages/s, log scale)',
      yLabel: 'messages/s',
      xLog: true,
      series: [
        {
          name: 'offered (ideal)',
          color: '#999',
          dashed: true,
          points: pts.map((p) => [p.offered, p.offered]),
        },
        { name: 'answered', color: '#1f77b4', points: pts.map((p) => [p.offered, p.answeredPerSec]) },
      ],
    },
    {
      title: 'reply latency (send → reply seen)',
      xLabel: 'offered load (messages/s, log scale)',
      yLabel: 'ms (log scale)',
      xLog: true,
      yLog: true,
      series: [
        { name: 'p99', color: '#d62728', points: pts.map((p) => [p.offered, p.replyP99Ms]) },
        { name: 'p50', color: '#ff7f0e', points: pts.map((p) => [p.offered, p.replyP50Ms]) },
      ],
    },
  ]);
}

export function scalingChart(r: ScalingMedians, note: string): string {
  const rows = Object.entries(r.median)
    .map(([n, m]) => ({ n: Number(n), ...m }))
    .sort((a, b) => a.n - b.n);
  const one = rows[0] ? rows[0].turnsPerSec / rows[0].n : 0;
  return renderChart('Horizontal scaling: worker processes on one machine', note, [
    {
      title: 'turns/s',
      xLabel: 'worker processes',
      yLabel: 'turns/s',
      series: [
        {
          name: 'linear (n × one worker)',
          color: '#999',
          dashed: true,
          points: rows.map((m) => [m.n, m.n * one]),
        },
        {
          name: 'model-bound ideal',
          color: '#2ca02c',
          dashed: true,
          points: rows.map((m) => [m.n, m.idealTurnsPerSec]),
        },
        { name: 'measured', color: '#1f77b4', points: rows.map((m) => [m.n, m.turnsPerSec]) },
      ],
    },
  ]);
}

/** Writes the charts a bench report has data for; returns the files written. */
export function writeCharts(
  report: { date?: string; commit?: string; benchmarks: Record<string, unknown> },
  dir: string,
  label = '',
): string[] {
  const note =
    `${label}${report.date ? ` ${report.date.slice(0, 16).replace('T', ' ')} UTC` : ''}${report.commit ? `, commit ${report.commit}` : ''}`.trim();
  const written: string[] = [];
  mkdirSync(dir, { recursive: true });
  const offered = report.benchmarks['offered-load'] as OfferedPoints | undefined;
  if (offered?.points?.length) {
    const file = join(dir, 'offered-load.svg');
    writeFileSync(file, offeredLoadChart(offered, note));
    written.push(file);
  }
  const scaling = report.benchmarks.scaling as ScalingMedians | undefined;
  if (scaling?.median && Object.keys(scaling.median).length > 0) {
    const file = join(dir, 'scaling.svg');
    writeFileSync(file, scalingChart(scaling, note));
    written.push(file);
  }
  return written;
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  const [input, dir, ...label] = process.argv.slice(2);
  if (!input || !dir) {
    process.stderr.write('usage: tsx bench/lib/chart.ts <report.json> <dir> [label]\n');
    process.exit(2);
  }
  const files = writeCharts(JSON.parse(readFileSync(input, 'utf8')), dir, label.join(' '));
  process.stderr.write(
    files.length > 0 ? `wrote ${files.join(', ')}\n` : 'no offered-load or scaling data in the report\n',
  );
}
