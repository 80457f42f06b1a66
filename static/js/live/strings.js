// The words the live script writes, in the reader's language. The server renders them into
// <template id="live-strings"> (templates/jobs/_live_strings.html) for this request, so the script
// holds no text of its own and a page never mixes two languages. `{x}` in a word marks a number the
// script fills in; keys ending in _html keep their markup.

const words = new Map(), rawWords = new Map();
const template = document.getElementById("live-strings");
if (template && template.content) {
  for (const node of template.content.querySelectorAll("[data-key]")) {
    words.set(node.getAttribute("data-key"), node.innerHTML.trim());
    rawWords.set(node.getAttribute("data-key"), node.innerHTML);
  }
}

// The words are stored as the server escaped them; a detached element turns them back into text.
const scratch = document.createElement("div");

/** A word as plain text; `fallback` (or "") when the page does not have it. */
export function word(key, fallback) {
  if (!words.has(key)) return fallback === undefined ? "" : fallback;
  scratch.innerHTML = words.get(key);
  return scratch.textContent;
}

/** A word whose spaces matter (a separator such as ", "): not trimmed, unlike `word`. */
export function rawWord(key, fallback) {
  if (!rawWords.has(key)) return fallback === undefined ? "" : fallback;
  scratch.innerHTML = rawWords.get(key);
  return scratch.textContent;
}

/** A word's markup as the server wrote it (a key ending in _html); `fallback` when missing or empty. */
export function markup(key, fallback) {
  return words.get(key) || fallback;
}

/** Whether the page has a non-empty word for `key`. */
export function hasWord(key) {
  return !!words.get(key);
}

/** "{n} failed" + {n: 3} -> "3 failed"; a placeholder without a value stays as it is. */
export function fill(text, values) {
  return text.replace(/\{(\w+)\}/g, (m, k) => (k in values ? String(values[k]) : m));
}

/** "1 face" / "3 faces": the page has the forms for one and for two; n goes in place of the digit. */
export function faces(n) {
  if (n === 1) return word("faces_one", "1");
  return word("faces_other", String(n)).replace(/\d+/, String(n));
}

/** "1 result needs a look" / "3 results need a look" (jobs.job.again). */
export function needLook(n) {
  if (n === 1) return word("look_one", "1");
  return word("look_other", String(n)).replace(/\d+/, String(n));
}

/** "1 person" / "3 people": a video's faces are the people on screen at once (the most in one frame). */
export function people(n) {
  if (n === 1) return word("people_one", "1");
  return word("people_other", String(n)).replace(/\d+/, String(n));
}

/** A job status in the reader's language (the event's own label only if the page lacks it). */
export function jobLabel(job) {
  return word("job:" + job.status, job.status_label || job.status);
}

/** A target status in the reader's language. */
export function targetLabel(target) {
  return word("target:" + target.status, target.status_label || target.status);
}
