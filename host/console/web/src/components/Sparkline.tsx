// A tiny line of recent values, drawn as SVG (a uPlot per table row would be heavy).
const WIDTH = 120;
const HEIGHT = 28;

export function Sparkline({ values, label }: { values: number[]; label: string }) {
  if (values.length < 2) return <span class="muted">—</span>;
  const max = Math.max(...values) || 1;
  const step = WIDTH / (values.length - 1);
  const points = values
    .map((v, i) => `${(i * step).toFixed(1)},${(HEIGHT - 2 - (v / max) * (HEIGHT - 4)).toFixed(1)}`)
    .join(' ');
  return (
    <svg class="sparkline" viewBox={`0 0 ${WIDTH} ${HEIGHT}`} width={WIDTH} height={HEIGHT} role="img" aria-label={label}>
      <polyline points={points} />
    </svg>
  );
}
