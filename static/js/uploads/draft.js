// Switching the language reloads New job: what was typed and attached so far is kept for that one
// reload, in this tab only (sessionStorage), and put back: the name, the folder, the callback, the
// choices, and the files already sent (their ids: the files stay on the server, shown attached
// again by zone.js). Nothing is kept on any other way off the page.

const KEY = "ffp.newJobDraft";
const TEXTS = ["name", "target_folder", "callback_url"];
const RADIOS = ["template", "face_selector"];

function form() {
  return document.querySelector("form.newjob");
}

/** Keep the form's state when the language switch (the top bar's form.langs) is used. */
export function keepOnLanguageSwitch(zones) {
  const switcher = document.querySelector("form.langs");
  const page = form();
  if (!switcher || !page) return;
  switcher.addEventListener("submit", () => {
    const draft = { path: window.location.pathname, texts: {}, radios: {}, uploads: {} };
    for (const name of TEXTS) if (page.elements[name]) draft.texts[name] = page.elements[name].value;
    for (const name of RADIOS) {
      const checked = page.querySelector(`input[name=${name}]:checked`);
      if (checked) draft.radios[name] = checked.value;
    }
    draft.consent = Boolean(page.elements.consent && page.elements.consent.checked);
    for (const zone of zones) draft.uploads[zone.kind] = zone.readyIds();
    try {
      window.sessionStorage.setItem(KEY, JSON.stringify(draft));
    } catch (e) {
      // storage full or turned off: the switch goes on, the form starts empty as before
    }
  });
}

/** The draft kept for this page (taken: it is used once), or null. */
export function takeDraft() {
  let draft = null;
  try {
    draft = JSON.parse(window.sessionStorage.getItem(KEY) || "null");
    window.sessionStorage.removeItem(KEY);
  } catch (e) {
    return null;
  }
  return draft && draft.path === window.location.pathname ? draft : null;
}

/** Put the draft's words and choices back, where the page did not bring its own. */
export function restoreFields(draft) {
  const page = form();
  if (!page || !draft) return;
  const changed = (node) => node.dispatchEvent(new Event("change", { bubbles: true }));
  for (const name of RADIOS) {
    const value = (draft.radios || {})[name];
    const radio = value && Array.from(page.querySelectorAll(`input[name=${name}]`)).find((r) => r.value === value);
    if (radio && !radio.checked) { radio.checked = true; changed(radio); }
  }
  for (const [name, value] of Object.entries(draft.texts || {})) {
    const field = page.elements[name];
    if (field && value && !field.value) { field.value = value; changed(field); }
  }
  if (draft.consent && page.elements.consent) page.elements.consent.checked = true;
  const advanced = document.getElementById("advanced");
  if (advanced && (draft.texts || {}).callback_url) advanced.open = true;
}
