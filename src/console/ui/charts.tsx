import { useEffect, useMemo, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { type Answer, type Bucket, DECISIONS, type Decision, type Stats } from './api.js';

const COLOURS: Record<Decision, string> = {
  approved: '#2e7d32',
  declined: '#c62828',
  filtered: '#ef8f00',
  no_score: '#757575',
};
const HEIGHT = 220;
/** A bucket's start as uPlot's x: seconds since the epoch. */
const seconds = (b: Bucket) => Date.parse(b.start) / 1000;

/** One uPlot chart that follows its container's width and its data; destroyed with the component. */
function Plot({ options, data, label }: { options: Omit<uPlot.Options, 'width' | 'height'>; data: uPlot.AlignedData; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    plot.current?.destroy();
    plot.current = new uPlot({ ...options, width: Math.max(el.clientWidth, 300), height: HEIGHT }, data, el);
    const resize = () => plot.current?.setSize({ width: Math.max(el.clientWidth, 300), height: HEIGHT });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.current?.destroy();
      plot.current = null;
    };
  }, [options, data]);
  return <div class="chart" ref={box} role="img" aria-label={label} />;
}

/**
 * Decisions as stacked bars: each series is drawn from zero to its running total, the widest
 * first, so each shows as its own band; the legend shows each decision's own count.
 */
function decisionChart(buckets: Bucket[], bucket: 'hour' | 'day'): [Omit<uPlot.Options, 'width' | 'height'>, uPlot.AlignedData] {
  const xs = buckets.map(seconds);
  const own = DECISIONS.map((d) => buckets.map((b) => b.decisions[d]));
  const stacked = own.map((_, i) => buckets.map((_, j) => own.slice(i).reduce((sum, series) => sum + (series[j] ?? 0), 0)));
  const bars = uPlot.paths.bars?.({ size: [0.7, 60], align: 0 });
  const options: Omit<uPlot.Options, 'width' | 'height'> = {
    title: `Decisions per ${bucket}`,
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    series: [
      {},
      ...DECISIONS.map((d, i) => ({
        label: d,
        fill: COLOURS[d],
        stroke: COLOURS[d],
        width: 0,
        paths: bars,
        points: { show: false },
        value: (_u: uPlot, _v: number, _si: number, idx: number | null) => (idx === null ? '—' : String(own[i]?.[idx] ?? 0)),
      })),
    ],
  };
  return [options, [xs, ...stacked]];
}

function turnaroundChart(buckets: Bucket[]): [Omit<uPlot.Options, 'width' | 'height'>, uPlot.AlignedData] {
  const inSeconds = (ms: number | null) => (ms === null ? null : ms / 1000);
  const options: Omit<uPlot.Options, 'width' | 'height'> = {
    title: 'Turnaround, submit to callback (seconds)',
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    series: [
      {},
      { label: 'p50', stroke: '#1f4e79', width: 2, spanGaps: false },
      { label: 'p95', stroke: '#b5651d', width: 2, dash: [6, 4], spanGaps: false },
    ],
  };
  return [
    options,
    [buckets.map(seconds), buckets.map((b) => inSeconds(b.turnaroundMs.p50)), buckets.map((b) => inSeconds(b.turnaroundMs.p95))],
  ];
}

export function Charts({ stats, bucket }: { stats: Answer<Stats> | null; bucket: 'hour' | 'day' }) {
  // Built once per answer, so a re-render for another reason does not redraw the charts.
  const charts = useMemo(
    () => (stats?.ok ? { decisions: decisionChart(stats.data.buckets, bucket), turnaround: turnaroundChart(stats.data.buckets) } : null),
    [stats, bucket],
  );
  if (!charts) {
    return (
      <div class="charts charts-empty" data-testid="charts">
        <p class="note">— no figures to show</p>
      </div>
    );
  }
  return (
    <div class="charts" data-testid="charts">
      <Plot options={charts.decisions[0]} data={charts.decisions[1]} label="Decisions per bucket" />
      <Plot options={charts.turnaround[0]} data={charts.turnaround[1]} label="Turnaround p50 and p95" />
    </div>
  );
}
