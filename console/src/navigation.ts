/** Where the console is served ('/console/'): its pages are the path segment after it. */
export const BASE = import.meta.env.BASE_URL;

/** The console page the address names ('keys', 'projects'), without the fragment that may open a record on it. */
export const currentPath = () => window.location.pathname.slice(BASE.length).replace(/\/$/, '');

/** A console page's address: `to` is the page's path, with a fragment to open one of its records (`projects#prj_…`). */
export const consoleHref = (to: string) => `${BASE}${to}`;

/**
 * Follows a link to a console page in this tab (history.pushState, then the popstate the shell listens
 * to); a click with a modifier or another button is left to the browser (a new tab, a new window).
 */
export function followLink(event: MouseEvent, to: string): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  event.preventDefault();
  window.history.pushState(null, '', consoleHref(to));
  window.dispatchEvent(new PopStateEvent('popstate'));
}
