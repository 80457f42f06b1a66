// Building the page's elements. Everything the script draws is built from elements and text nodes,
// never from HTML strings, so a file name or an error text in a message can never become markup.

import { jobLabel } from "./strings.js";

/**
 * A new element. `attrs`: `text` sets its text, `className` its class, `style` (an object) its
 * style through the CSSOM (allowed under a Content-Security-Policy that forbids inline styles),
 * anything else an attribute (true: present and empty; null, undefined or false: absent).
 * `children`: elements or strings; null, undefined and false are skipped.
 */
export function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k === "className") node.className = v;
    else if (k === "style") Object.assign(node.style, v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children || []) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return node;
}

/** A job's status badge: the class the server gives it (templates/jobs/_status.html) and its label. */
export function setBadge(badge, job) {
  badge.className = "badge status-" + job.status;
  badge.textContent = jobLabel(job);
}

/**
 * "Are you sure?" before a form that cannot be undone (Cancel job): a form with
 * data-confirm="<id of a <dialog>>" opens that dialog instead of posting; the dialog's button with
 * value="cancel" posts the form, any other button or Escape keeps things as they are. Without
 * this script (or without <dialog>) the form simply posts.
 */
export function guardConfirm(doc) {
  for (const form of doc.querySelectorAll("form[data-confirm]")) {
    const dialog = doc.getElementById(form.getAttribute("data-confirm"));
    if (!dialog || typeof dialog.showModal !== "function") continue;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      dialog.returnValue = "";
      dialog.showModal();
    });
    dialog.addEventListener("close", () => {
      if (dialog.returnValue === "cancel") form.submit(); // submit(): no second submit event
    });
  }
}
