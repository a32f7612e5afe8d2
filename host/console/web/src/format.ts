// How numbers, sizes, digests and times read on the page.
import type { DeployReport } from './api';

export const shortDigest = (digest: string) => digest.slice(0, 12);

/** A module's name by default: its file name without `.wasm`. */
export const moduleNameOf = (file: File) => file.name.replace(/\.wasm$/i, '');

const number = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });

export const count = (n: number) => number.format(n);

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024;
    unit += 1;
  }
  return `${number.format(n)} ${units[unit]}`;
}

export function duration(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return `${Math.floor(seconds / 86400)} d ${Math.floor((seconds % 86400) / 3600)} h`;
}

export const ago = (ms: number) => `${duration(Math.max(0, Date.now() - ms) / 1000)} ago`;

export const dateTime = (ms: number) => new Date(ms).toLocaleString();

export const clock = (ms: number) => new Date(ms).toLocaleTimeString();

/** One sentence for what a deploy or rollback did. */
export function describeReport(report: DeployReport): string {
  const parts = [`${report.outcome}: ${shortDigest(report.from)} → ${shortDigest(report.to)}`];
  if (report.position) parts.push(`at version ${report.position.version}, row ${report.position.row_offset}`);
  if (report.pause_ms != null) parts.push(`held ${count(report.pause_ms)} ms`);
  if (report.committed_rows != null) parts.push(`${count(report.committed_rows)} rows committed at the boundary`);
  parts.push(`prepared in ${count(report.prepare_ms)} ms`);
  if (report.outcome === 'stored') parts.push('it runs when the pipeline is resumed');
  return `${parts.join('; ')}.`;
}
