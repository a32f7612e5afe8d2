// A uPlot time chart. The plot is made once per mount and fed new data on each
// render; it follows its container's width.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

interface Series {
  label: string;
  color: string;
  values: number[];
}

interface Props {
  /** Seconds since the epoch. */
  times: number[];
  series: Series[];
  format?: (value: number) => string;
}

const HEIGHT = 180;

/** Shows the span of `times`, widened to the last five minutes at least. */
function showTimes(plot: uPlot, times: number[]) {
  if (times.length === 0) return;
  const last = times[times.length - 1];
  plot.setScale('x', { min: Math.min(times[0], last - 300), max: last });
}

export function Chart({ times, series, format = String }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const data: uPlot.AlignedData = [times, ...series.map((s) => s.values)];

  useEffect(() => {
    const element = box.current!;
    const options: uPlot.Options = {
      width: element.clientWidth,
      height: HEIGHT,
      scales: {
        // Set from the data below: at least five minutes wide, so a lone first point
        // does not get a scale of its own making.
        x: { time: true, auto: false },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [{}, { size: 60, values: (_u, splits) => splits.map(format) }],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 1.5,
          value: (_u: uPlot, v: number | null) => (v == null ? '—' : format(v)),
        })),
      ],
    };
    const made = new uPlot(options, data, element);
    plot.current = made;
    showTimes(made, times);
    const resize = new ResizeObserver(() => made.setSize({ width: element.clientWidth, height: HEIGHT }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      made.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    if (plot.current) {
      plot.current.setData(data);
      showTimes(plot.current, times);
    }
  });

  return <div ref={box} class="chart" />;
}
