// The service's API: types of its answers and one function per call. Every call
// sends the token as a Bearer header; a 401 signs the caller out.
import { currentToken, signOut, type Identity } from './auth';

const REJECTED_TOKEN = 'The token was not accepted.';

export type State = 'running' | 'paused' | 'failed' | 'finished';

export interface Position {
  version: number;
  row_offset: number;
  /** Left out by the service when false. */
  snapshot?: boolean;
}

export interface Counters {
  rows_in: number;
  records_out: number;
  bytes_out: number;
  failed_rows: number;
  failed_batches: number;
  traps: number;
  host_limits: number;
  sink_retries: number;
  registry_retries: number;
  source_retries: number;
  storage_requests: number;
  storage_failures: number;
  batches: number;
  guest_seconds: number;
  swaps: number;
  last_swap_pause_seconds: number;
  /** Keyed state on the node that runs it (zeros for a pipeline without [state]). */
  state: StateMetrics;
}

export interface StateMetrics {
  keys: number;
  bytes: number;
  /** Changelog offsets the restore in progress, or the last, read and had to read. */
  restore_read: number;
  restore_total: number;
  restore_seconds: number;
}

/** An outage a running pipeline waits out: the schema registry gives no schema ids. */
export interface Waiting {
  for: 'registry';
  url: string;
  since_ms: number;
  retries: number;
  next_retry_ms: number;
  gives_up_ms: number;
  reason: string;
  /** The same in a sentence, as of the answer. */
  message: string;
}

export interface PipelineStatus {
  tenant: string;
  name: string;
  state: State;
  node: string | null;
  error: string | null;
  waiting?: Waiting | null;
  module: { digest: string; name: string; language?: string | null; size_bytes?: number };
  previous_module: string | null;
  last_swap?: { at_ms: number; from: string; to: string; outcome?: string } | null;
  table: string;
  topic: string;
  dead_letter_topic: string | null;
  /** With [state], the topic its keyed state is committed to. */
  changelog_topic?: string | null;
  /** `[source] ending_version`: the last version it delivers (a replay's end). */
  ending_version?: number | null;
  position: Position;
  latest_version: number;
  lag_versions: number;
  rows_per_second: number;
  counters: Counters;
  config: string;
}

export interface HistoryPoint {
  at_ms: number;
  rows_per_second: number;
  records_per_second: number;
  lag_versions: number;
  /** Mean seconds in the module per batch. */
  guest_seconds_per_batch: number;
  /** Seconds in the module per second (above 1 with several instances). */
  guest_share: number;
  errors: number;
}

export interface History {
  interval_seconds: number;
  points: HistoryPoint[];
}

/** The recent points of each of a tenant's pipelines, by name. */
export interface TenantHistory {
  interval_seconds: number;
  pipelines: Record<string, HistoryPoint[]>;
}

export interface LogLine {
  at_ms: number;
  level: string;
  /** Digest of the module that wrote it. */
  module: string;
  message: string;
}

export interface DeadLetter {
  partition: number;
  offset: number;
  timestamp_ms: number | null;
  key: string | null;
  letter: {
    table: string;
    version: number;
    row: number;
    change_type: string;
    /** ISO 8601, UTC. */
    commit_timestamp: string | null;
    module: string;
    module_digest: string;
    error_kind: string;
    error: string;
    data: unknown;
  };
}

export interface DeadLetters {
  topic: string | null;
  letters: DeadLetter[];
  /** Records of the topic that are not letters of this pipeline's table. */
  skipped: number;
}

export interface DeployReport {
  from: string;
  to: string;
  outcome: 'switched' | 'started' | 'stored';
  position: Position | null;
  pause_ms: number | null;
  committed_rows: number | null;
  prepare_ms: number;
}

export interface RecordCounts {
  equal: number;
  changed: number;
  added: number;
  missing: number;
}

export interface ShadowRecord {
  topic: string;
  partition: number | null;
  key: string | null;
  value: string | null;
  headers: [string, string][];
}

export interface ModuleCost {
  transform_ms: number;
  records: number;
  output_bytes: number;
  memory_peak_bytes: number;
}

/** A shadow deploy's comparison so far (docs/changes.md). */
export interface ShadowReport {
  candidate: string;
  candidate_name: string;
  live: string;
  phase: 'running' | 'finished' | 'stopped';
  reason: string | null;
  started_ms: number;
  batches: number;
  rows: number;
  skipped_batches: number;
  through: Position | null;
  topics: Record<string, RecordCounts>;
  rejections: { both: number; live_only: number; candidate_only: number };
  failed_batches: number;
  errors: { position: Position; error: string }[];
  differences: {
    version: number;
    row: number;
    kind: 'changed' | 'added' | 'missing' | 'rejection';
    live: ShadowRecord | null;
    candidate: ShadowRecord | null;
    error: string | null;
  }[];
  live_cost: ModuleCost;
  candidate_cost: ModuleCost;
  /** For a stateful pipeline: the candidate's copy of the live state. */
  state?: {
    copied_keys: number;
    copied_bytes: number;
    copy_ms: number;
    keys: number;
    bytes: number;
    changes_equal: number;
    changes_differ: number;
    live_only: number;
    candidate_only: number;
    caught_up_batches: number;
  } | null;
}

/** One end of a replay: a version number, or an RFC 3339 commit time. */
export type ReplayEnd = { version: number } | { timestamp: string };

export interface ReplayRequest {
  from: ReplayEnd;
  to: ReplayEnd;
  topic: string;
  module?: string;
  snapshot?: boolean;
  name?: string;
  dead_letter_topic?: string;
}

export interface Module {
  digest: string;
  name: string;
  size_bytes: number;
  contract: string;
  /** Seconds since the epoch. */
  uploaded_at: number;
  language?: string | null;
  used_by?: string[];
}

export interface Tenant {
  name: string;
  source: string;
  pipelines: number;
  settings: Record<string, unknown>;
}

export interface HostStatus {
  uptime_seconds: number;
  memory: {
    /** Unset where the service cannot read it (no /proc). */
    rss_bytes: number | null;
    reserved_guest_mib: number;
    max_guest_mib: number;
  };
  limits: { max_pipelines: number; max_memory_mib: number; max_module_mib: number };
  tenants: {
    tenant: string;
    running: number;
    paused: number;
    failed: number;
    finished: number;
    reserved_guest_mib: number;
    max_pipelines: number;
    max_memory_mib: number;
  }[];
}

export class ApiError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

interface CallOptions {
  method?: string;
  body?: BodyInit;
  contentType?: string;
  signal?: AbortSignal;
  /** Used only to sign in; otherwise the stored token. */
  token?: string;
}

/** Makes a call and returns the response when it succeeded; throws ApiError otherwise. */
async function call(path: string, options: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${options.token ?? currentToken() ?? ''}`,
  };
  if (options.contentType) headers['Content-Type'] = options.contentType;
  let response: Response;
  try {
    response = await fetch(path, {
      method: options.method ?? 'GET',
      headers,
      body: options.body,
      signal: options.signal,
      cache: 'no-store',
    });
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw new ApiError('The service could not be reached.', 0);
  }
  if (response.ok) return response;
  if (response.status === 401) {
    signOut(REJECTED_TOKEN);
    throw new ApiError(REJECTED_TOKEN, 401);
  }
  throw new ApiError(await refusal(response), response.status);
}

/** The sentence of an `{"error": ...}` answer, or a plain one naming the status. */
async function refusal(response: Response): Promise<string> {
  try {
    const body = await response.json();
    if (typeof body?.error === 'string') return body.error;
  } catch {
    // not JSON: fall through
  }
  const reason = response.statusText ? ` ${response.statusText}` : '';
  return `The service answered ${response.status}${reason}.`;
}

async function json<T>(path: string, options?: CallOptions): Promise<T> {
  return (await call(path, options)).json() as Promise<T>;
}

const seg = encodeURIComponent;
const pipelinePath = (tenant: string, name: string) =>
  `/v1/tenants/${seg(tenant)}/pipelines/${seg(name)}`;

export const whoami = (token: string) => json<Identity>('/v1/whoami', { token });

export const tenants = (signal?: AbortSignal) => json<Tenant[]>('/v1/tenants', { signal });

export const pipelines = (tenant: string, signal?: AbortSignal) =>
  json<PipelineStatus[]>(`/v1/tenants/${seg(tenant)}/pipelines`, { signal });

export const pipeline = (tenant: string, name: string, signal?: AbortSignal) =>
  json<PipelineStatus>(pipelinePath(tenant, name), { signal });

export const history = (tenant: string, name: string, signal?: AbortSignal) =>
  json<History>(`${pipelinePath(tenant, name)}/history`, { signal });

export const tenantHistory = (tenant: string, last: number, signal?: AbortSignal) =>
  json<TenantHistory>(`/v1/tenants/${seg(tenant)}/history?last=${last}`, { signal });

export const deadLetters = (tenant: string, name: string, signal?: AbortSignal) =>
  json<DeadLetters>(`${pipelinePath(tenant, name)}/dead-letters?limit=50`, { signal });

export const pause = (tenant: string, name: string) =>
  json<PipelineStatus>(`${pipelinePath(tenant, name)}/pause`, { method: 'POST' });

export const resume = (tenant: string, name: string) =>
  json<PipelineStatus>(`${pipelinePath(tenant, name)}/resume`, { method: 'POST' });

export const rollback = (tenant: string, name: string) =>
  json<DeployReport>(`${pipelinePath(tenant, name)}/rollback`, { method: 'POST' });

export const deploy = (tenant: string, name: string, module: string, sampleRows?: number, resetState = false) =>
  json<DeployReport>(`${pipelinePath(tenant, name)}/deploy`, {
    method: 'POST',
    contentType: 'application/json',
    body: JSON.stringify({
      module,
      ...(sampleRows === undefined ? {} : { sample_rows: sampleRows }),
      ...(resetState ? { reset_state: true } : {}),
    }),
  });

/** Starts a replay of versions of the pipeline's table: a pipeline of its own. */
export const replay = (tenant: string, name: string, request: ReplayRequest) => {
  const end = (side: 'from' | 'to', value: ReplayEnd) =>
    'version' in value ? { [`${side}_version`]: value.version } : { [`${side}_timestamp`]: value.timestamp };
  return json<PipelineStatus>(`${pipelinePath(tenant, name)}/replays`, {
    method: 'POST',
    contentType: 'application/json',
    body: JSON.stringify({
      ...end('from', request.from),
      ...end('to', request.to),
      topic: request.topic,
      ...(request.module ? { module: request.module } : {}),
      ...(request.snapshot ? { snapshot: true } : {}),
      ...(request.name ? { name: request.name } : {}),
      ...(request.dead_letter_topic ? { dead_letter_topic: request.dead_letter_topic } : {}),
    }),
  });
};

export const startShadow = (tenant: string, name: string, module: string) =>
  json<ShadowReport>(`${pipelinePath(tenant, name)}/shadow`, {
    method: 'POST',
    contentType: 'application/json',
    body: JSON.stringify({ module }),
  });

/** The pipeline's shadow deploy, or `null` when it has none. */
export const shadow = (tenant: string, name: string, signal?: AbortSignal) =>
  json<ShadowReport>(`${pipelinePath(tenant, name)}/shadow`, { signal }).catch((error) => {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  });

export const promoteShadow = (tenant: string, name: string) =>
  json<DeployReport>(`${pipelinePath(tenant, name)}/shadow/promote`, { method: 'POST' });

export const discardShadow = (tenant: string, name: string) =>
  json<ShadowReport>(`${pipelinePath(tenant, name)}/shadow/discard`, { method: 'POST' });

export const modules = (tenant: string, signal?: AbortSignal) =>
  json<Module[]>(`/v1/tenants/${seg(tenant)}/modules`, { signal });

export const uploadModule = (tenant: string, name: string, bytes: Blob) =>
  json<Module>(`/v1/tenants/${seg(tenant)}/modules?name=${seg(name)}`, {
    method: 'POST',
    contentType: 'application/wasm',
    body: bytes,
  });

export const host = (signal?: AbortSignal) => json<HostStatus>('/v1/host', { signal });

/** The follow stream of a pipeline's log; read it with `readLines`. */
export const logStream = (tenant: string, name: string, signal: AbortSignal) =>
  call(`${pipelinePath(tenant, name)}/logs?follow=true`, { signal });

/** Calls `onLines` with each batch of complete NDJSON lines until the stream ends. */
export async function readLines<T>(response: Response, onLines: (lines: T[]) => void): Promise<void> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let rest = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    const parts = (rest + value).split('\n');
    rest = parts.pop() ?? '';
    const lines = parts.filter((part) => part.trim() !== '').map((part) => JSON.parse(part) as T);
    if (lines.length > 0) onLines(lines);
  }
}

/** Tenants whose data the caller sees. */
export async function visibleTenants(identity: Identity, signal?: AbortSignal): Promise<string[]> {
  if (identity.role === 'tenant') return [identity.tenant];
  return (await tenants(signal)).map((tenant) => tenant.name).sort();
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
