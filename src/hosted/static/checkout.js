// Hosted checkout pages: the little script they need. It calls the public routes through the
// same-origin relay (/hosted/api/public/...) with the merchant's publishable key; the customer
// token stays in an HTTP-only cookie the relay reads, so this script never sees it.
(function () {
  'use strict';

  var dataEl = document.getElementById('page-data');
  if (!dataEl) return;
  var data = JSON.parse(dataEl.textContent);
  var messages = data.messages || {};

  function msg(key, vars) {
    var text = messages[key] || messages.error_generic || '';
    return text.replace(/\{(\w+)\}/g, function (whole, name) {
      return vars && name in vars ? String(vars[name]) : whole;
    });
  }

  function $(id) {
    return document.getElementById(id);
  }

  /** One call on a public route; network failures come back as status 0. */
  function api(method, path, body) {
    var init = {
      method: method,
      headers: { Authorization: 'Bearer ' + data.key, Accept: 'application/json' },
      credentials: 'same-origin',
      cache: 'no-store',
    };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch('/hosted/api/public' + path, init).then(
      function (res) {
        return res
          .json()
          .catch(function () {
            return null;
          })
          .then(function (json) {
            return { status: res.status, body: json, retryAfter: res.headers.get('Retry-After') };
          });
      },
      function () {
        return { status: 0, body: null, retryAfter: null };
      },
    );
  }

  function errorCode(res) {
    return res.body && res.body.error ? res.body.error.code : null;
  }

  function errorFields(res) {
    var details = (res.body && res.body.error && res.body.error.details) || [];
    return details.map(function (d) {
      return d.field;
    });
  }

  /** The message for a refusal the shopper can act on. */
  function errorText(res) {
    if (res.status === 0) return msg('error_network');
    switch (errorCode(res)) {
      case 'otp_invalid':
        return msg('error_otp_invalid');
      case 'otp_expired':
        return msg('error_otp_expired');
      case 'otp_locked':
        return msg('error_otp_locked');
      case 'rate_limited':
        return msg('error_rate_limited', { seconds: res.retryAfter || 60 });
      case 'phone_not_verified':
        return msg('error_verify_first');
      case 'method_not_available':
        return msg('error_method_unavailable');
      case 'attempt_in_progress':
        return msg('error_in_progress');
      case 'gateway_error':
      case 'gateway_not_configured':
        return msg('error_gateway');
      default:
        return msg('error_generic');
    }
  }

  /** Arabic-Indic and Persian digits (as Arabic and Kurdish keyboards type them) to ASCII. */
  function asciiDigits(text) {
    return text.replace(/[\u0660-\u0669\u06f0-\u06f9]/g, function (c) {
      var code = c.charCodeAt(0);
      return String(code >= 0x06f0 ? code - 0x06f0 : code - 0x0660);
    });
  }

  /** Iraqi mobile formats to E.164, as the service does (07701234567, 7701234567, 9647…, 009647…). */
  function normalisePhone(input) {
    var compact = asciiDigits(input)
      .replace(/[\s\-()]/g, '')
      .replace(/^(\+|00)9640/, '+964');
    if (/^\+[1-9][0-9]{6,14}$/.test(compact)) return compact;
    var digits = compact.replace(/^00/, '');
    if (!/^[0-9]+$/.test(digits)) return null;
    var national = digits.indexOf('964') === 0 ? digits.slice(3) : digits.charAt(0) === '0' ? digits.slice(1) : digits;
    return /^7[0-9]{9}$/.test(national) ? '+964' + national : null;
  }

  /** As the page prints it: 0770 123 4567 with no-break spaces, isolated left to right. */
  function formatPhone(e164) {
    var m = /^\+964(7\d{2})(\d{3})(\d{4})$/.exec(e164);
    return '\u2066' + (m ? '0' + m[1] + '\u00a0' + m[2] + '\u00a0' + m[3] : e164) + '\u2069';
  }

  function setFieldError(id, text) {
    var input = $(id);
    var line = $(id + '-error');
    if (input) input.setAttribute('aria-invalid', text ? 'true' : 'false');
    if (line) {
      line.textContent = text || '';
      line.hidden = !text;
    }
  }

  function setBusy(button, busy, label) {
    if (!button) return;
    if (busy) {
      button.dataset.label = button.textContent;
      button.textContent = msg('working');
      button.setAttribute('aria-busy', 'true');
      button.disabled = true;
    } else {
      button.textContent = label || button.dataset.label || button.textContent;
      button.removeAttribute('aria-busy');
      button.disabled = false;
    }
  }

  function checkoutPage() {
    var code = data.code;
    var base = '/sessions/' + code;
    var verified = data.verified;
    var sentTo = null;
    var resendTimer = null;
    var form = $('checkout');
    var pay = $('pay');
    var formError = $('form-error');

    function showFormError(text) {
      formError.textContent = text;
      formError.hidden = !text;
    }

    /** The session moved on (paid, cancelled, expired): the page shows its new state. */
    function reload() {
      window.location.replace('/c/' + code);
    }

    // The pay button says what the chosen method will do.
    var radios = form.querySelectorAll('input[name="method"]');
    function selectedMethod() {
      var chosen = form.querySelector('input[name="method"]:checked');
      return chosen && !chosen.disabled ? chosen : null;
    }
    Array.prototype.forEach.call(radios, function (radio) {
      radio.addEventListener('change', function () {
        var chosen = selectedMethod();
        if (chosen) pay.textContent = chosen.dataset.payLabel;
        setFieldError('method', '');
      });
    });

    // Phone verification by SMS code.
    var phoneInput = $('phone');
    var otpInput = $('otp');

    function startResendCountdown(seconds) {
      var left = Math.max(0, Math.round(seconds));
      var wait = $('resend-wait');
      var resend = $('resend');
      clearInterval(resendTimer);
      function tick() {
        if (left <= 0) {
          clearInterval(resendTimer);
          wait.textContent = '';
          resend.hidden = false;
          return;
        }
        resend.hidden = true;
        // Announced once, then updated silently.
        wait.textContent = msg('resend_in', { seconds: left });
        left -= 1;
      }
      tick();
      resendTimer = setInterval(function () {
        wait.setAttribute('aria-live', 'off');
        tick();
      }, 1000);
    }

    function sendCode(button) {
      var phone = normalisePhone(phoneInput.value);
      setFieldError('phone', '');
      setFieldError('otp', '');
      if (!phone) {
        setFieldError('phone', msg('error_phone'));
        phoneInput.focus();
        return;
      }
      setBusy(button, true);
      api('POST', base + '/otp', { phone: phone }).then(function (res) {
        setBusy(button, false);
        if (res.status === 202) {
          sentTo = phone;
          showFormError('');
          $('phone-entry').hidden = true;
          $('code-entry').hidden = false;
          $('otp-help').textContent = msg('code_sent_to', { phone: formatPhone(phone) });
          otpInput.value = '';
          otpInput.focus();
          startResendCountdown(res.body.retry_after);
        } else if (errorCode(res) === 'session_not_open') {
          reload();
        } else if (errorCode(res) === 'validation_error') {
          setFieldError('phone', msg('error_phone'));
          phoneInput.focus();
        } else {
          var onCodeStep = !$('code-entry').hidden;
          setFieldError(onCodeStep ? 'otp' : 'phone', errorText(res));
        }
      });
    }

    function verifyCode() {
      var button = $('verify-code');
      var otp = asciiDigits(otpInput.value).replace(/\s/g, '');
      setFieldError('otp', '');
      if (!/^[0-9]{6}$/.test(otp)) {
        setFieldError('otp', msg('error_code_format'));
        otpInput.focus();
        return;
      }
      if (button.disabled) return;
      setBusy(button, true);
      api('POST', base + '/otp/verify', { phone: sentTo, code: otp }).then(function (res) {
        if (res.status === 200) {
          // The relay kept the customer token in its cookie; the page now shows the verified number.
          window.location.replace('/c/' + code + window.location.search);
          return;
        }
        setBusy(button, false);
        if (errorCode(res) === 'session_not_open') return reload();
        setFieldError('otp', errorText(res));
        otpInput.select();
      });
    }

    if (phoneInput) {
      $('send-code').addEventListener('click', function () {
        sendCode($('send-code'));
      });
      phoneInput.addEventListener('keydown', function (e) {
        if (e.key === 'Enter') {
          e.preventDefault();
          sendCode($('send-code'));
        }
      });
      $('resend').addEventListener('click', function () {
        sendCode($('resend'));
      });
      $('change-phone').addEventListener('click', function () {
        clearInterval(resendTimer);
        $('code-entry').hidden = true;
        $('phone-entry').hidden = false;
        setFieldError('otp', '');
        phoneInput.focus();
      });
      $('verify-code').addEventListener('click', verifyCode);
      otpInput.addEventListener('keydown', function (e) {
        if (e.key === 'Enter') {
          e.preventDefault();
          verifyCode();
        }
      });
      // A code filled in whole (typed, pasted or offered by the phone's keyboard) is checked at once.
      otpInput.addEventListener('input', function () {
        if (/^[0-9]{6}$/.test(asciiDigits(otpInput.value).trim())) verifyCode();
      });
    }

    // Name and address.
    function value(id) {
      var el = $(id);
      return el ? el.value.trim() : '';
    }

    /** The details to save, or null after marking what is missing. */
    function collectDetails() {
      var out = {};
      var missing = [];
      if ($('name')) {
        setFieldError('name', '');
        if (value('name')) out.name = value('name');
        else if (data.collect.name === 'required') missing.push('name');
      }
      if ($('governorate')) {
        var parts = ['governorate', 'city', 'line'];
        var given = parts.filter(function (p) {
          return value(p) !== '';
        });
        parts.forEach(function (p) {
          setFieldError(p, '');
        });
        if (given.length > 0 || data.collect.shipping_address === 'required') {
          parts.forEach(function (p) {
            if (!value(p)) missing.push(p);
          });
          if (given.length === parts.length) {
            out.address = {
              governorate: value('governorate'),
              city: value('city'),
              line: value('line'),
              landmark: value('landmark') || null,
              country: 'IQ',
            };
          }
        }
      }
      missing.forEach(function (id) {
        setFieldError(id, msg('error_required'));
      });
      if (missing.length > 0) {
        $(missing[0]).focus();
        return null;
      }
      return out;
    }

    /** Marks the fields a 400 names (name, address.city, customer.address…). */
    function markServerFields(res) {
      var marked = null;
      errorFields(res).forEach(function (field) {
        var id = String(field || '')
          .replace(/^customer\./, '')
          .replace(/^address\./, '');
        if (id === 'address') id = 'governorate';
        if ($(id + '-error')) {
          setFieldError(id, msg('error_required'));
          marked = marked || id;
        }
      });
      if (marked) $(marked).focus();
      return marked !== null;
    }

    function fail(res) {
      setBusy(pay, false, selectedMethod() ? selectedMethod().dataset.payLabel : undefined);
      var codeName = errorCode(res);
      if (codeName === 'session_not_open' || codeName === 'attempt_in_progress') return reload();
      if (codeName === 'phone_not_verified') {
        verified = false;
        showFormError(msg('error_verify_first'));
        if (phoneInput) phoneInput.focus();
        return;
      }
      if (codeName === 'validation_error' && markServerFields(res)) return;
      showFormError(errorText(res));
      formError.focus();
    }

    form.addEventListener('submit', function (e) {
      e.preventDefault();
      if (pay.disabled) return;
      showFormError('');
      if (data.collect.phone === 'required' && !verified) {
        showFormError(msg('error_verify_first'));
        (phoneInput && !$('phone-entry').hidden ? phoneInput : otpInput || pay).focus();
        return;
      }
      var details = collectDetails();
      if (!details) return;
      var method = selectedMethod();
      if (!method) {
        setFieldError('method', msg('error_choose_method'));
        var first = form.querySelector('input[name="method"]:not([disabled])');
        if (first) first.focus();
        return;
      }
      setBusy(pay, true);
      var saved =
        details.name || details.address
          ? api('PUT', base + '/customer', details)
          : Promise.resolve({ status: 200, body: null });
      saved.then(function (res) {
        if (res.status !== 200) return fail(res);
        return api('POST', base + '/attempts', { method: method.value }).then(function (res) {
          if (res.status !== 201) return fail(res);
          if (res.body.kind === 'redirect' && res.body.redirect_url) {
            window.location.assign(res.body.redirect_url);
          } else {
            window.location.assign('/c/' + code + '?attempt=' + encodeURIComponent(res.body.attempt_id));
          }
        });
      });
    });

    // Cancel, after a second, explicit choice.
    var cancel = $('cancel');
    var confirmBox = $('cancel-confirm');
    cancel.addEventListener('click', function () {
      var open = confirmBox.hidden;
      confirmBox.hidden = !open;
      cancel.setAttribute('aria-expanded', String(open));
      if (open) $('cancel-no').focus();
    });
    $('cancel-no').addEventListener('click', function () {
      confirmBox.hidden = true;
      cancel.setAttribute('aria-expanded', 'false');
      cancel.focus();
    });
    $('cancel-yes').addEventListener('click', function () {
      var yes = $('cancel-yes');
      setBusy(yes, true);
      api('POST', base + '/cancel').then(function (res) {
        if (res.status === 200) {
          if (data.cancelUrl) window.location.assign(data.cancelUrl);
          else reload();
          return;
        }
        setBusy(yes, false);
        if (errorCode(res) === 'session_not_open') return reload();
        showFormError(errorText(res));
      });
    });

    // A field's error goes once the shopper changes it.
    form.addEventListener('input', function (e) {
      var id = e.target && e.target.id;
      if (id && e.target.getAttribute('aria-invalid') === 'true') setFieldError(id, '');
    });
    form.addEventListener('change', function (e) {
      var id = e.target && e.target.id;
      if (id && e.target.getAttribute('aria-invalid') === 'true') setFieldError(id, '');
    });

    var failure = $('failure');
    if (failure) failure.setAttribute('tabindex', '-1');
  }

  function returnPage() {
    if (data.redirectTo) {
      setTimeout(function () {
        window.location.replace(data.redirectTo);
      }, 1200);
      return;
    }
    var started = Date.now();
    var status = $('return-status');
    var shown = 'return_body';

    function show(key) {
      if (shown === key) return;
      shown = key;
      status.textContent = msg(key);
    }

    function delay() {
      var elapsed = Date.now() - started;
      return elapsed < 10000 ? 1000 : elapsed < 60000 ? 2000 : 5000;
    }

    /** Where a final attempt takes the shopper: the merchant, or back to the checkout page; false while pending. */
    function land(a) {
      if (a.status === 'pending') return false;
      if (a.status === 'succeeded' && a.redirect_to) window.location.replace(a.redirect_to);
      else window.location.replace('/c/' + a.code + '?attempt=' + encodeURIComponent(a.attempt_id));
      return true;
    }

    function progress() {
      var elapsed = Date.now() - started;
      if (elapsed > 100000) show('return_very_slow');
      else if (elapsed > 15000) show('return_slow');
    }

    function poll() {
      api('GET', '/attempts/' + encodeURIComponent(data.attemptId)).then(function (res) {
        if (res.status === 200 && land(res.body)) return;
        progress();
        setTimeout(poll, delay());
      });
    }

    // The outcome is pushed on an event stream; the page polls when there is none, or it fails before the end.
    function listen() {
      var source = new EventSource('/hosted/api/public/attempts/' + encodeURIComponent(data.attemptId) + '/stream');
      var ticker = setInterval(progress, 1000);
      function stop() {
        source.close();
        clearInterval(ticker);
      }
      source.addEventListener('attempt', function (e) {
        var a = JSON.parse(e.data);
        if (a.status !== 'pending') {
          stop();
          land(a);
        }
      });
      // The stream's life is over (or its server is stopping): a new one.
      source.addEventListener('reconnect', function () {
        stop();
        listen();
      });
      source.addEventListener('error', function () {
        stop();
        setTimeout(poll, delay());
      });
    }

    if (window.EventSource) listen();
    else setTimeout(poll, delay());
  }

  if (data.page === 'checkout') checkoutPage();
  if (data.page === 'return') returnPage();
})();
