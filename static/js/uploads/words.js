// The words the upload widget writes, from <template id="upload-strings"> (templates/jobs/
// _upload_strings.html), rendered for this request in the reader's language. `{x}` in a word is
// filled with text (numbers, sizes, names), never markup.

const table = new Map();
const source = document.getElementById("upload-strings");
if (source && source.content) {
  const scratch = document.createElement("div");
  for (const node of source.content.querySelectorAll("[data-key]")) {
    scratch.innerHTML = node.innerHTML.trim();
    table.set(node.dataset.key, scratch.textContent);
  }
}

/** The word `key` with its `{x}` places filled from `values`. */
export function t(key, values = {}) {
  const text = table.get(key) || key;
  return text.replace(/\{(\w+)\}/g, (m, name) => (name in values ? String(values[name]) : m));
}

/** "12.5 MB": bytes in the units people read (decimal, as file managers show them). */
export function size(bytes) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let value = bytes, unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return (unit === 0 || value >= 100 ? Math.round(value) : value.toFixed(1)) + " " + units[unit];
}

/** "45 s", "3 min", "1 h 5 min". */
export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return t("seconds", { n: s });
  if (s < 3600) return t("minutes", { n: Math.round(s / 60) });
  return t("hours", { h: Math.floor(s / 3600), m: Math.round((s % 3600) / 60) });
}
