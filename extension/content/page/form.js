// form_input: sets form fields (inputs, textareas, selects, checkboxes,
// radios, switches, contenteditable) and fires input and change as a user
// would. Each field is named by a ref or by a CSS selector; one call may set
// several, each with its own result, one failure not stopping the others.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { clean } = P.util;
  const { refOf, needEl } = P.refs;
  const { roleOf, nameOf, valueOf } = P.a11y;

  const fire = (target, names) => {
    for (const n of names) target.dispatchEvent(new Event(n, { bubbles: true, composed: true }));
  };

  /**
   * The element a field names: {el, note?}. A selector takes its first
   * match (the note says how many matched).
   */
  function fieldElement(f) {
    if (f.ref) return { el: needEl(f.ref) };
    let all;
    try {
      all = document.querySelectorAll(f.selector);
    } catch {
      throw new Error(`${JSON.stringify(f.selector)} is not a valid CSS selector`);
    }
    if (!all.length) throw new Error(`no element matches the selector ${f.selector}`);
    return {
      el: all[0],
      note: all.length > 1 ? `${all.length} elements match ${f.selector}; this is the first` : undefined,
    };
  }

  /**
   * Sets one element to value; label names it in errors (its ref, or the
   * selector). A password field takes a value only when allowSecrets (the
   * site's secrets opt-in, sw/policy.js secretsAllowed); secretsWhy is the
   * refusal's reason as the worker words it (sw/policy.js secretsRefusal).
   */
  function setField(el, label, value, allowSecrets, secretsWhy) {
    const ref = refOf(el);
    const secret = P.hidden.isSecret(el);
    if (secret && !allowSecrets) {
      throw new Error(
        `${label} is a password field on ${location.origin}, and ` +
          (secretsWhy ||
            'the person has not let agents type secrets on this site; ask them to tick "secrets" for it in Browser Bridge\'s options, or to type it themselves'),
      );
    }
    const role = roleOf(el);
    const tag = el.tagName;
    const type = tag === 'INPUT' ? (el.getAttribute('type') || 'text').toLowerCase() : '';
    const before = valueOf(el, role);
    if (el.disabled) throw new Error(`${label} (${role} "${nameOf(el, role)}") is disabled`);
    el.scrollIntoView({ block: 'center', behavior: 'instant' });
    if (tag === 'INPUT' && type === 'file') {
      throw new Error('this is a file input: use upload_image to put a file into it');
    }
    if (
      (tag === 'INPUT' && (type === 'checkbox' || type === 'radio')) ||
      role === 'checkbox' ||
      role === 'radio' ||
      role === 'switch'
    ) {
      const want = typeof value === 'boolean' ? value : !/^(false|0|off|no|unchecked|)$/i.test(String(value));
      const isNative = tag === 'INPUT';
      const current = isNative ? el.checked : el.getAttribute('aria-checked') === 'true';
      if (current !== want) {
        if (isNative && type === 'radio' && !want) {
          el.checked = false;
          fire(el, ['input', 'change']);
        } else el.click();
      }
      const now = isNative ? el.checked : el.getAttribute('aria-checked') === 'true';
      if (now !== want && isNative) {
        el.checked = want;
        fire(el, ['input', 'change']);
      }
      return {
        ref,
        role,
        name: nameOf(el, role),
        checked: isNative ? el.checked : el.getAttribute('aria-checked') === 'true',
      };
    }
    if (tag === 'SELECT') {
      const wanted = (Array.isArray(value) ? value : [value]).map((v) => String(v));
      const opts = [...el.options];
      const pick = (v) =>
        opts.find((o) => o.value === v) ||
        opts.find((o) => clean(o.label || o.text).toLowerCase() === v.trim().toLowerCase()) ||
        opts.find((o) =>
          clean(o.label || o.text)
            .toLowerCase()
            .includes(v.trim().toLowerCase()),
        );
      const chosen = wanted.map((v) => {
        const o = pick(v);
        if (!o) {
          throw new Error(
            `no option "${v}" in ${label}; options: ${opts
              .slice(0, 30)
              .map((x) => JSON.stringify(clean(x.label || x.text, 40)))
              .join(', ')}`,
          );
        }
        return o;
      });
      if (!el.multiple && chosen.length > 1) throw new Error(`${label} is a single-choice select; give one value`);
      el.focus();
      if (el.multiple) for (const o of opts) o.selected = chosen.includes(o);
      else el.value = chosen[0].value;
      fire(el, ['input', 'change']);
      return {
        ref,
        role,
        name: nameOf(el, role),
        before,
        value: valueOf(el, role),
        selectedValues: [...el.selectedOptions].map((o) => o.value),
      };
    }
    if (tag === 'INPUT' || tag === 'TEXTAREA') {
      if (el.readOnly) throw new Error(`${label} is read-only`);
      const v = value === null || value === undefined ? '' : String(value);
      el.focus();
      // The prototype's setter, so that frameworks which wrap the element's own (React) see a change.
      const proto = tag === 'INPUT' ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
      Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, v);
      fire(el, ['input', 'change']);
      const after = el.value;
      const res = {
        ref,
        role,
        name: nameOf(el, role),
        before,
        value: secret ? valueOf(el, role) : after,
      };
      if (after !== v && !secret) {
        res.note = `the field holds "${after}" after setting "${v}" (the input type or the page normalised it)`;
      }
      return res;
    }
    if (el.isContentEditable) {
      el.focus();
      const sel = getSelection();
      sel.removeAllRanges();
      const range = document.createRange();
      range.selectNodeContents(el);
      sel.addRange(range);
      const v = value == null ? '' : String(value);
      if (!document.execCommand('insertText', false, v)) {
        el.textContent = v;
        fire(el, ['input']);
      }
      return { ref, role, name: nameOf(el, role), before, value: clean(el.innerText, 200) };
    }
    throw new Error(
      `${label} is a ${role} (<${tag.toLowerCase()}>), not a form field; use computer to click or type into it`,
    );
  }

  /** One field: {field, ok: true, ref, role, name, …} or {field, ok: false, error}. */
  function fillOne(f, allowSecrets, secretsWhy) {
    const field = f.ref || f.selector;
    try {
      const { el, note } = fieldElement(f);
      const r = setField(el, field, f.value, allowSecrets, secretsWhy);
      if (note) r.note = r.note ? `${note}; ${r.note}` : note;
      return { field, ok: true, ...r };
    } catch (e) {
      return { field, ok: false, error: String((e && e.message) || e) };
    }
  }

  // One task of the page's event loop: what a change handler scheduled
  // (a framework's render, a field it reveals) runs before the next field.
  // A message, not a timer: timers are throttled in background tabs.
  const nextTask = () =>
    new Promise((resolve) => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => {
        ch.port1.close();
        resolve();
      };
      ch.port2.postMessage(null);
    });

  /**
   * args: {fields: [{ref|selector, value}], allowSecrets?, secretsWhy?}. Sets them in
   * order and returns a result for each, in the same order.
   */
  P.ops.fill = (args) => {
    const fields = args.fields || [];
    const allow = args.allowSecrets === true;
    const why = typeof args.secretsWhy === 'string' ? args.secretsWhy : '';
    if (fields.length <= 1) return fields.map((f) => fillOne(f, allow, why));
    return (async () => {
      const results = [];
      for (const [i, f] of fields.entries()) {
        if (i > 0) await nextTask();
        results.push(fillOne(f, allow, why));
      }
      return results;
    })();
  };
})();
