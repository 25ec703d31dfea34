// The end-to-end tests' dev_utils actions: testbrowser.BuildExtension copies
// this file over extension/tools/dev_utils_extra.js in the extension the
// tests load (the installed one has none). native_echo_benchmark opens a
// native-messaging port to an echo host that only the tests register
// (bridge/internal/e2e/testdata/echohost) and times raw round trips, to
// compare the whole chain with raw native messaging (BenchmarkE2E…).
//
// Self-contained: it is imported from extension/test/overlay/tools/ by the
// unit tests and from extension/tools/ in the tests' build.

/** Summary statistics (ms) of a list of durations: {count, min, max, mean, median, p95, p99}. */
export function summarize(times) {
  const a = [...times].sort((x, y) => x - y);
  const n = a.length;
  if (!n) return { count: 0 };
  const q = (p) => a[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))];
  const r3 = (v) => Math.round(v * 1000) / 1000;
  return {
    count: n,
    min: r3(a[0]),
    max: r3(a[n - 1]),
    mean: r3(a.reduce((s, v) => s + v, 0) / n),
    median: r3(n % 2 ? a[(n - 1) / 2] : (a[n / 2 - 1] + a[n / 2]) / 2),
    p95: r3(q(0.95)),
    p99: r3(q(0.99)),
  };
}

/** Round trips of count messages of about size bytes to a native echo host. */
export async function nativeEchoBenchmark({
  host,
  count,
  size,
  warmup = 3,
  timeoutMs = 5000,
  signal,
  connect = (h) => chrome.runtime.connectNative(h),
}) {
  const port = connect(host);
  const payload = 'x'.repeat(Math.max(0, size));
  let waiting = null;
  let closed = null;
  port.onMessage.addListener((msg) => {
    if (waiting) {
      const w = waiting;
      waiting = null;
      w.resolve(msg);
    }
  });
  port.onDisconnect.addListener(() => {
    const err =
      (typeof chrome !== 'undefined' &&
        chrome.runtime &&
        chrome.runtime.lastError &&
        chrome.runtime.lastError.message) ||
      'the host closed the port';
    closed = new Error(`native host ${host}: ${err}`);
    if (waiting) {
      const w = waiting;
      waiting = null;
      w.reject(closed);
    }
  });
  const roundTrip = (seq) =>
    new Promise((resolve, reject) => {
      if (closed) return reject(closed);
      const timer = setTimeout(() => {
        waiting = null;
        reject(new Error(`native host ${host}: no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting = {
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      port.postMessage({ seq, payload });
    });
  const times = [];
  try {
    for (let i = 0; i < warmup + count; i++) {
      if (signal && signal.aborted) throw new Error('cancelled');
      const t0 = performance.now();
      await roundTrip(i);
      const dt = performance.now() - t0;
      if (i >= warmup) times.push(dt);
    }
  } finally {
    try {
      port.disconnect();
    } catch {
      /* already closed */
    }
  }
  return { host, size, warmup, ...summarize(times) };
}

export default {
  native_echo_benchmark: {
    description:
      'opens a native-messaging port to an echo host (default com.browserbridge.echo) and times count ' +
      'round trips of size-byte messages, returning median/p95/p99 in ms, to compare the whole chain with raw native messaging.',
    properties: {
      host: {
        type: 'string',
        pattern: '^[a-z0-9_]+(\\.[a-z0-9_]+)*$',
        maxLength: 200,
        description: 'native_echo_benchmark: the native host name (default com.browserbridge.echo).',
      },
      count: {
        type: 'integer',
        minimum: 1,
        maximum: 100000,
        description: 'native_echo_benchmark: how many timed round trips (default 100).',
      },
      size: {
        type: 'integer',
        minimum: 0,
        maximum: 50000000,
        description: 'native_echo_benchmark: payload bytes per message (default 64).',
      },
      warmup: {
        type: 'integer',
        minimum: 0,
        maximum: 1000,
        description: 'native_echo_benchmark: untimed round trips first (default 3).',
      },
    },
    async run(args, ctx) {
      const host = args.host || 'com.browserbridge.echo';
      const r = await nativeEchoBenchmark({
        host,
        count: args.count || 100,
        size: args.size ?? 64,
        warmup: args.warmup ?? 3,
        signal: ctx.signal,
      });
      return {
        content: [
          {
            type: 'text',
            text: `${r.count} round trips of ${r.size} B to ${host}: median ${r.median} ms, p95 ${r.p95} ms, p99 ${r.p99} ms (min ${r.min}, max ${r.max}).`,
          },
        ],
      };
    },
  },
};
