// resize_window: sets the size of the window holding the session's tab.

import { ToolError } from '../sw/tools.js';
import { useTab, send } from '../sw/cdp.js';
import { release as releaseView } from '../sw/steadyview.js';
import * as props from './props.js';

export default {
  name: 'resize_window',
  description: "Sets the tab's window's outer width and height (CSS px); returns the viewport.",
  inputSchema: {
    type: 'object',
    properties: {
      width: { type: 'integer', minimum: 200, maximum: 10000 },
      height: { type: 'integer', minimum: 200, maximum: 10000 },
      tabId: props.tabId,
    },
    required: ['width', 'height'],
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const tab = await useTab(ctx, args.tabId);
    await releaseView(tab.id); // a page held through a load (sw/steadyview.js) must follow the new size
    let win;
    try {
      win = await chrome.windows.update(tab.windowId, { state: 'normal' });
      win = await chrome.windows.update(tab.windowId, { width: args.width, height: args.height });
    } catch (e) {
      throw new ToolError(`could not resize window ${tab.windowId}: ${e.message}`);
    }
    let viewport = null;
    try {
      await new Promise((r) => setTimeout(r, 150));
      const m = await send(tab.id, 'Page.getLayoutMetrics', {});
      const vv = m.cssVisualViewport || m.visualViewport;
      if (vv) viewport = { width: Math.round(vv.clientWidth), height: Math.round(vv.clientHeight) };
    } catch {
      /* viewport unknown */
    }
    const text =
      `Window ${win.id} is now ${win.width}x${win.height}${viewport ? `; the tab's viewport is ${viewport.width}x${viewport.height} CSS px` : ''}.` +
      (win.width !== args.width || win.height !== args.height
        ? ' (The window manager or screen limited the size.)'
        : '');
    return { content: [{ type: 'text', text }] };
  },
};
