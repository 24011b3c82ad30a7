// The console's pages refresh their [data-live] parts every data-refresh ms:
// the script fetches the page again and swaps those parts in, as the server
// rendered and escaped them; a page without such parts is not fetched again.
// It pauses while the tab is hidden or a form field has the focus.
(function () {
  'use strict';
  var every = parseInt(document.body.getAttribute('data-refresh'), 10);
  var status = document.getElementById('status');
  if (window.location.search.indexOf('done=') >= 0 && window.history.replaceState) {
    var query = new URLSearchParams(window.location.search);
    query.delete('done');
    var rest = query.toString();
    window.history.replaceState(null, '', window.location.pathname + (rest ? '?' + rest : ''));
  }
  if (!(every > 0) || !document.querySelector('[data-live]')) {
    return;
  }
  function busy() {
    var a = document.activeElement;
    return document.hidden || (a && (a.tagName === 'INPUT' || a.tagName === 'SELECT' || a.tagName === 'TEXTAREA'));
  }
  function tick() {
    if (busy()) {
      window.setTimeout(tick, every);
      return;
    }
    window.fetch(window.location.pathname + window.location.search, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error('HTTP ' + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        document.querySelectorAll('[data-live]').forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh) {
            el.replaceWith(document.importNode(fresh, true));
          }
        });
        status.textContent = '';
      })
      .catch(function (err) {
        status.textContent = 'refresh failed: ' + err.message;
      })
      .finally(function () {
        window.setTimeout(tick, every);
      });
  }
  window.setTimeout(tick, every);
})();
