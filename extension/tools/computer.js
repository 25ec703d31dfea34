// computer: mouse, keyboard, scrolling, waiting, screenshots and zoom on the
// session's tab, through CDP Input.* and Page.captureScreenshot (sw/cdp.js,
// sw/screenshot.js). Targets are viewport coordinates (in the pixels of the
// tab's last screenshot) or element refs from read_page/find.

import { ToolError } from '../sw/tools.js';
import * as cdp from '../sw/cdp.js';
import {
  captureTab,
  captureFullResolution,
  getTabScale,
  imageToCss,
  putScreenshot,
  DEFAULT_MAX_EDGE,
  DEFAULT_BUDGET,
} from '../sw/screenshot.js';
import { runAgent } from '../content/agent.js';
import { noteAction } from './gif_creator.js';
import { usePage } from '../sw/pageload.js';
import * as gate from '../sw/gate.js';
import { secretsAllowed, secretsRefusal } from '../sw/policy.js';
import * as props from './props.js';
import { REPORT_ONLY, runOps, settleAfter } from '../sw/settle.js';

export const ACTIONS = [
  'left_click',
  'right_click',
  'middle_click',
  'double_click',
  'triple_click',
  'type',
  'key',
  'scroll',
  'scroll_to',
  'hover',
  'left_click_drag',
  'wait',
  'screenshot',
  'zoom',
];

/** The actions that do not need the page's content (they work on Chrome's error page too). */
const LOOK_ONLY = ['screenshot', 'zoom', 'wait'];

const point = () => ({ type: 'array', items: { type: 'number' }, minItems: 2, maxItems: 2 });

// The tool's description explains every argument once, in the action it serves.
export const inputSchema = {
  type: 'object',
  properties: {
    action: { type: 'string', enum: ACTIONS },
    coordinate: point(),
    ref: props.ref(),
    start_coordinate: point(),
    start_ref: props.ref(),
    text: { type: 'string' },
    modifiers: { type: 'string' },
    repeat: { type: 'integer', minimum: 1, maximum: 100 },
    scroll_direction: { type: 'string', enum: ['up', 'down', 'left', 'right'], default: 'down' },
    scroll_amount: { type: 'integer', minimum: 1, maximum: 50, default: 3 },
    duration: { type: 'number', minimum: 0, maximum: 30, default: 1 },
    region: { type: 'array', items: { type: 'number' }, minItems: 4, maxItems: 4 },
    format: { type: 'string', enum: ['png', 'jpeg', 'webp'] },
    quality: { type: 'integer', minimum: 10, maximum: 100, default: 80 },
    max_edge: { type: 'integer', minimum: 0, maximum: 16384, default: DEFAULT_MAX_EDGE },
    full_resolution: { type: 'boolean' },
    tabId: props.tabId,
  },
  required: ['action'],
  additionalProperties: false,
};

function parseModifiers(s) {
  if (!s) return 0;
  let bits = 0;
  for (const part of String(s)
    .split(/[+\s,]+/)
    .filter(Boolean)) {
    const chord = cdp.parseChord(`${part}+a`);
    if (!chord.modifiers) throw new ToolError(`"${part}" is not a modifier key`);
    bits |= chord.modifiers;
  }
  return bits;
}

function describeTarget(t) {
  if (!t) return '';
  return ` on ${t.role}${t.name ? ` "${t.name}"` : ''} [${t.ref}]`;
}

/**
 * Resolves {coordinate | ref} to viewport CSS px and a description of what
 * is there. watch: start watching the page for settle.js in the same call
 * into the page (t.watched says whether it did).
 */
async function target(tabId, coordinate, ref, what = 'the target', { watch = false } = {}) {
  const also = watch ? [['watch', {}]] : [];
  if (ref) {
    let loc;
    try {
      [loc] = await runOps(tabId, [['locate', { ref }], ...also]);
    } catch (e) {
      throw new ToolError(e.message);
    }
    const info = { ref, role: loc.role, name: loc.name };
    return { x: loc.x, y: loc.y, info, obscuredBy: loc.obscuredBy, watched: watch };
  }
  if (!coordinate) throw new ToolError(`give ${what} as coordinate [x, y] or as ref`);
  const scale = await getTabScale(tabId);
  const [x, y] = imageToCss(coordinate, scale);
  let info = null;
  let watched = false;
  try {
    [info] = await runOps(tabId, [['elementAt', { x, y }], ...also]);
    watched = watch;
  } catch {
    /* not scriptable: act anyway */
  }
  return { x, y, info, watched };
}

/**
 * Clicks at (x, y) CSS px. The move, each press and each release are sent
 * without waiting for the one before (Chromium delivers a tab's input in
 * the order sent; Puppeteer's click does the same), except that the presses
 * wait for beforePress (settle.js's read of the page's script time, which
 * must come before any handler of the click runs).
 */
async function clickAt(tabId, x, y, { button = 'left', clickCount = 1, modifiers = 0 } = {}, beforePress = null) {
  const mouse = (type, extra) => cdp.send(tabId, 'Input.dispatchMouseEvent', { type, x, y, modifiers, ...extra });
  await Promise.all([mouse('mouseMoved', { buttons: 0 }), beforePress && beforePress.catch(() => {})]);
  const sent = [];
  for (let i = 1; i <= clickCount; i++) {
    sent.push(mouse('mousePressed', { button, buttons: BUTTON_BITS[button] || 0, clickCount: i }));
    sent.push(mouse('mouseReleased', { button, buttons: 0, clickCount: i }));
  }
  await Promise.all(sent);
}

const BUTTON_BITS = { left: 1, right: 2, middle: 4 };

/**
 * Presses the key chords of text, repeat times; a chord's events (its
 * modifiers down, the key, the modifiers up) are sent without waiting for
 * each other, as clickAt's mouse events are. Answers how many chords.
 */
async function pressChords(tabId, text, { repeat = 1, signal } = {}) {
  const chords = cdp.parseKeySequence(text);
  for (let r = 0; r < repeat; r++) {
    for (const chord of chords) {
      if (signal && signal.aborted) throw new Error('cancelled');
      await Promise.all(cdp.chordEvents(chord).map((ev) => cdp.send(tabId, 'Input.dispatchKeyEvent', ev)));
    }
  }
  return chords.length * repeat;
}

const round = (n) => Math.round(n * 10) / 10;

/**
 * Refuses typing into a password field (at: the page's secretTarget answer
 * for the ref's element, else the focused one) unless the person opted the
 * site in to secrets.
 */
async function refuseSecret(tab, ref, at) {
  if (!at.secret) return;
  const policy = await gate.policy();
  if (secretsAllowed(policy, tab.url || '')) return;
  throw new ToolError(
    `${ref ? `${ref} is` : 'the focused element is'} a password field on ${at.origin}, and ${secretsRefusal(policy, tab.url || '')}.`,
  );
}

/**
 * Asks the page where a key press or typing goes (secretTarget), where the
 * ref is (locate) and starts watching it for settle.js, in one call; a page
 * that cannot be scripted has no field to ask about (unless a ref was given).
 * @returns {Promise<{at: object|null, loc: object|null, watched: boolean}>}
 */
async function prepareKeys(tabId, ref) {
  const calls = [['secretTarget', { ref: ref || undefined }], ...(ref ? [['locate', { ref }]] : []), ['watch', {}]];
  try {
    const values = await runOps(tabId, calls);
    return { at: values[0], loc: ref ? values[1] : null, watched: true };
  } catch (e) {
    if (ref) throw new ToolError(e.message);
    return { at: null, loc: null, watched: false };
  }
}

/** Stops the watch prepareKeys started, when no action follows it. */
const unwatch = (tabId) => runAgent(tabId, 'settle', { last: true }).catch(() => {});

async function screenshotResult(tab, args, { region } = {}) {
  const opts = {
    format: args.format || 'png',
    quality: args.quality,
    maxEdge: args.max_edge ?? DEFAULT_MAX_EDGE,
    budget: DEFAULT_BUDGET,
    keepFormat: false,
  };
  if (region) {
    const scale = await getTabScale(tab.id);
    const [x0, y0] = imageToCss([region[0], region[1]], scale);
    const [x1, y1] = imageToCss([region[2], region[3]], scale);
    opts.region = [x0, y0, x1, y1];
  }
  const shot = await captureTab(tab.id, opts);
  // One id per screenshot, the one the text names: with full_resolution it is
  // the full-resolution PNG's (what resources/read and upload_image take);
  // the scaled image shown inline is not kept apart.
  const full = args.full_resolution && !region ? await captureFullResolution(tab.id) : null;
  const id = full
    ? full.id
    : putScreenshot({
        data: shot.data,
        mimeType: shot.mimeType,
        width: shot.width,
        height: shot.height,
        tabId: tab.id,
      });
  const content = [{ type: 'image', data: shot.data, mimeType: shot.mimeType }];
  // What a model acts on: the image's size and its id, and how its pixels
  // map to CSS px only when they differ.
  const lossy = shot.quality ? ` q${shot.quality}` : '';
  const perCss = Math.abs(shot.scale - 1) > 0.005 ? `, ${round(shot.scale)} image px per CSS px` : '';
  let text = region
    ? `Zoomed into region (${opts.region.map(Math.round).join(', ')}) CSS px of tab ${tab.id}: ${shot.width}x${shot.height} ${shot.format}${lossy}, ${round(shot.scale)} image px per CSS px. Coordinates for actions still refer to the last full screenshot.`
    : `Screenshot of tab ${tab.id}: ${shot.width}x${shot.height} ${shot.format}${lossy}${perCss}; click coordinates are this image's pixels.`;
  text += full
    ? ` Screenshot id: ${id}. Its full resolution (${full.width}x${full.height} PNG) is the resource ${full.uri} (resources/read); upload_image takes the same id.`
    : ` Screenshot id: ${id}.`;
  if (shot.overBudget) text += ' Note: still above the size budget at the lowest quality.';
  if (full) {
    content.push({
      type: 'resource_link',
      uri: full.uri,
      name: `screenshot-${full.id}.png`,
      mimeType: 'image/png',
      description: `Full-resolution screenshot, ${full.width}x${full.height} PNG (${Math.round((full.chars * 0.75) / 1024)} KiB)`,
    });
  }
  content.push({ type: 'text', text });
  return { content };
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(new ToolError('cancelled'));
    const t = setTimeout(resolve, ms);
    if (signal) {
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          reject(new ToolError('cancelled'));
        },
        { once: true },
      );
    }
  });
}

async function run(args, ctx) {
  // Looking (screenshot, zoom) and waiting work on any tab, Chrome's error
  // page included; acting on the page needs one that loaded.
  const tab = LOOK_ONLY.includes(args.action) ? await cdp.useTab(ctx, args.tabId) : await usePage(ctx, args.tabId);
  const tabId = tab.id;
  const action = args.action;
  const mods = parseModifiers(args.modifiers);
  let text;
  let pt = null; // CSS px of the action, for gif_creator
  let after = null; // what changed on the page after the action (sw/settle.js)

  const guard = async (fn) => {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof ToolError) throw e;
      throw new ToolError(`${action} failed on tab ${tabId}: ${e.message}`);
    }
  };

  switch (action) {
    case 'left_click':
    case 'right_click':
    case 'middle_click':
    case 'double_click':
    case 'triple_click': {
      const t = await target(tabId, args.coordinate, args.ref, undefined, { watch: true });
      const button = action === 'right_click' ? 'right' : action === 'middle_click' ? 'middle' : 'left';
      const clickCount = action === 'double_click' ? 2 : action === 'triple_click' ? 3 : 1;
      after = await settleAfter(
        tabId,
        (scriptRead) => guard(() => clickAt(tabId, t.x, t.y, { button, clickCount, modifiers: mods }, scriptRead)),
        { watched: t.watched },
      );
      pt = [t.x, t.y];
      // A click by ref names the element; where it was is the model's concern only when it gave a point.
      text = args.ref
        ? `${action.replace('_', ' ')}${describeTarget(t.info)}.`
        : `${action.replace('_', ' ')} at (${round(t.x)}, ${round(t.y)}) CSS px${describeTarget(t.info)}.`;
      if (t.obscuredBy) {
        text += ` Warning: ${args.ref ? 'its centre' : 'the point'} is covered by ${t.obscuredBy.role} "${t.obscuredBy.name}" [${t.obscuredBy.ref}], which got the click.`;
      }
      break;
    }
    case 'hover': {
      const t = await target(tabId, args.coordinate, args.ref);
      await guard(() => cdp.mouseMove(tabId, t.x, t.y, { modifiers: mods }));
      pt = [t.x, t.y];
      text = `Mouse moved to (${round(t.x)}, ${round(t.y)})${describeTarget(t.info)}.`;
      break;
    }
    case 'left_click_drag': {
      const from = await target(
        tabId,
        args.start_coordinate,
        args.start_ref,
        'the start (start_coordinate or start_ref)',
      );
      const to = await target(tabId, args.coordinate, args.ref, 'the end (coordinate or ref)', { watch: true });
      after = await settleAfter(
        tabId,
        async (scriptRead) => {
          await scriptRead;
          return guard(() => cdp.mouseDrag(tabId, [from.x, from.y], [to.x, to.y], { modifiers: mods }));
        },
        { watched: to.watched },
      );
      pt = [to.x, to.y];
      text = `Dragged from (${round(from.x)}, ${round(from.y)})${describeTarget(from.info)} to (${round(to.x)}, ${round(to.y)})${describeTarget(to.info)}.`;
      break;
    }
    case 'type': {
      if (typeof args.text !== 'string') throw new ToolError('type needs text');
      // One call into the page before typing: the secret check, the ref's place, the watch.
      const { at, loc, watched } = await prepareKeys(tabId, args.ref);
      if (at) {
        try {
          await refuseSecret(tab, args.ref, at);
        } catch (e) {
          unwatch(tabId);
          throw e;
        }
      }
      const where = loc ? `${loc.role} "${loc.name}" [${args.ref}]` : 'the focused element';
      after = await settleAfter(
        tabId,
        async () => {
          if (loc) await guard(() => clickAt(tabId, loc.x, loc.y));
          await guard(() => cdp.typeText(tabId, args.text, { signal: ctx.signal }));
        },
        { ...REPORT_ONLY, watched },
      );
      text = `Typed ${args.text.length} characters into ${where}.`;
      break;
    }
    case 'key': {
      if (typeof args.text !== 'string' || !args.text.trim()) {
        throw new ToolError('key needs text, e.g. "Enter" or "ctrl+a"');
      }
      try {
        cdp.parseKeySequence(args.text);
      } catch (e) {
        throw new ToolError(e.message);
      }
      const { at, watched } = await prepareKeys(tabId, null);
      if (at) {
        try {
          await refuseSecret(tab, null, at);
        } catch (e) {
          unwatch(tabId);
          throw e;
        }
      }
      after = await settleAfter(
        tabId,
        async (scriptRead) => {
          await scriptRead;
          return guard(() => pressChords(tabId, args.text, { repeat: args.repeat || 1, signal: ctx.signal }));
        },
        { watched },
      );
      const n = after.value;
      text = `Pressed ${args.text}${(args.repeat || 1) > 1 ? ` ${args.repeat} times` : ''} (${n} key chord${n === 1 ? '' : 's'}).`;
      break;
    }
    case 'scroll': {
      const dir = args.scroll_direction || 'down';
      const amount = args.scroll_amount || 3;
      let t;
      if (args.coordinate || args.ref) t = await target(tabId, args.coordinate, args.ref);
      else {
        const vp = await guard(() => runAgent(tabId, 'scrollInfo'));
        t = { x: vp.width / 2, y: vp.height / 2, info: null };
      }
      const px = amount * 100;
      const dx = dir === 'left' ? -px : dir === 'right' ? px : 0;
      const dy = dir === 'up' ? -px : dir === 'down' ? px : 0;
      await guard(() => cdp.mouseWheel(tabId, t.x, t.y, dx, dy, { modifiers: mods }));
      await sleep(120, ctx.signal);
      let pos = null;
      try {
        pos = await runAgent(tabId, 'scrollInfo');
      } catch {
        /* ignore */
      }
      text = `Scrolled ${dir} by ${amount} tick${amount === 1 ? '' : 's'} at (${round(t.x)}, ${round(t.y)})${describeTarget(t.info)}.`;
      if (pos) text += ` Page scroll is now (${pos.scrollX}, ${pos.scrollY}) of ${pos.pageWidth}x${pos.pageHeight}.`;
      break;
    }
    case 'scroll_to': {
      if (!args.ref) throw new ToolError('scroll_to needs ref');
      const t = await target(tabId, null, args.ref);
      text = `Scrolled ${t.info.role} "${t.info.name}" [${args.ref}] into view; its centre is at (${t.x}, ${t.y}) CSS px.`;
      break;
    }
    case 'wait': {
      const secs = args.duration ?? 1;
      await sleep(secs * 1000, ctx.signal);
      text = `Waited ${secs} s.`;
      break;
    }
    case 'screenshot': {
      const res = await guard(() => screenshotResult(tab, args));
      noteAction(ctx, tabId, { action, at: Date.now() }, res).catch(() => {});
      return res;
    }
    case 'zoom': {
      if (!args.region) throw new ToolError('zoom needs region [x0, y0, x1, y1]');
      return guard(() => screenshotResult(tab, args, { region: args.region }));
    }
    default:
      throw new ToolError(`unknown action ${action}`);
  }
  noteAction(ctx, tabId, {
    action,
    coordinate: args.coordinate,
    ref: args.ref,
    text: action === 'key' ? args.text : undefined,
    cssPoint: pt,
    at: Date.now(),
  }).catch(() => {});
  if (after && after.note) text += ` ${after.note}`;
  return { content: [{ type: 'text', text }] };
}

export default {
  name: 'computer',
  description:
    'Target a ref or coordinate [x,y] in screenshot pixels, ' +
    "with modifiers ('ctrl+shift'). action: *_click, hover; left_click_drag from start_ref/start_coordinate; type text; " +
    "key text ('ctrl+a Enter') repeat times; scroll scroll_amount in scroll_direction; scroll_to ref; wait duration s; " +
    'screenshot (format, quality, max_edge, full_resolution); zoom region [x0,y0,x1,y1].',
  inputSchema,
  annotations: {
    readOnlyHint: false,
    destructiveHint: true,
    idempotentHint: false,
    openWorldHint: true,
  },
  run,
};
