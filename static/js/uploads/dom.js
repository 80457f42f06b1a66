// What the New job page's upload areas (zone.js, earlier.js) build their rows from.

import { t } from "./words.js";

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A file's small picture (the face found, a video's first frame, a photo scaled down). */
export function thumb(kind, preview, name) {
  const img = el("img", "upload-thumb");
  img.src = preview;
  img.alt = t(kind === "target" ? "preview_target" : "preview_face", { name: name });
  return img;
}
