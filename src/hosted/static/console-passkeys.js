// Console passkeys: the little script the Security page and the sign-in's second step use, with
// @simplewebauthn/browser (served beside it as simplewebauthn-browser.js). Progressive
// enhancement: a passkey section is `hidden` in the page and shown only here, when the browser
// can use passkeys; the code forms work without any script.
//
// A form with `data-passkey="register"` or `"authenticate"` asks its `data-options` URL for the
// options (a same-origin POST carrying the form's CSRF token), runs the browser's prompt, puts
// the browser's answer into the form's hidden `response` field and posts the form as usual, so
// the server's answer (a page, a redirect) is an ordinary navigation.
(function () {
  'use strict';

  var lib = window.SimpleWebAuthnBrowser;
  if (!lib || !lib.browserSupportsWebAuthn()) return;

  var forms = document.querySelectorAll('form[data-passkey]');
  Array.prototype.forEach.call(forms, function (form) {
    var section = form.closest('[data-passkey-section]');
    if (section) section.hidden = false;
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      run(form);
    });
  });

  function showError(form) {
    var status = form.querySelector('[data-passkey-status]');
    if (status) {
      status.textContent = form.getAttribute('data-failed') || '';
      status.hidden = false;
    }
  }

  function run(form) {
    var button = form.querySelector('button[type="submit"]');
    if (button) button.disabled = true;
    var body = new URLSearchParams();
    body.set('csrf_token', form.elements.namedItem('csrf_token').value);
    fetch(form.getAttribute('data-options'), {
      method: 'POST',
      body: body,
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { Accept: 'application/json' },
    })
      .then(function (res) {
        var type = res.headers.get('content-type') || '';
        if (res.ok && type.indexOf('application/json') === 0) return res.json();
        // Sent elsewhere (re-authentication): go there.
        if (res.redirected) window.location.assign(res.url);
        throw new Error('options refused: ' + res.status);
      })
      .then(function (options) {
        return form.getAttribute('data-passkey') === 'register'
          ? lib.startRegistration({ optionsJSON: options })
          : lib.startAuthentication({ optionsJSON: options });
      })
      .then(function (answer) {
        form.elements.namedItem('response').value = JSON.stringify(answer);
        // submit() posts without firing the submit event again.
        form.submit();
      })
      .catch(function () {
        if (button) button.disabled = false;
        showError(form);
      });
  }
})();
