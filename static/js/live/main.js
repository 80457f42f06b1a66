// The live pages' entry point, loaded as <script type="module"> (deferred: it runs once the page
// is parsed). The server renders the whole page; this keeps it current: the job's page (#job-live)
// from /ws/jobs/<id>/, the job list (#jobs-live) from /ws/jobs/. Any other page has neither root
// and nothing starts. Without WebSocket or fetch the server's page simply stays as rendered.

import { guardConfirm } from "./dom.js";
import { formatDates } from "./format.js";
import { JobList } from "./job_list.js";
import { JobPage } from "./job_page.js";
import { serverData } from "./server_data.js";

const jobRoot = document.getElementById("job-live");
const listRoot = document.getElementById("jobs-live");
const root = jobRoot || listRoot;

guardConfirm(document); // "Cancel this job?" needs no live connection

if (root && "WebSocket" in window && "fetch" in window) {
  const data = serverData(root);
  // A fade-in plays once: an element moved later must not play it again.
  root.addEventListener("animationend", (ev) => ev.target.classList.remove("is-new"));
  // The job page's dates are written as the server writes them (pageDate); the list's in the browser's style.
  if (listRoot) formatDates(root, data.timeZone);
  const page = jobRoot ? new JobPage(jobRoot, data) : new JobList(listRoot, data);
  page.start();
  window.ffpLive = page; // for debugging in the browser's console
}
