"""The portal's language: the user's own choice when they made one, else their browser's.

Who decides, first match wins:
1. A logged-in user's choice (`LanguagePreference`, made on the account page or with the switch
   in the top bar): `AccountLanguageMiddleware` applies it on every request.
2. The language cookie (the switch, for someone not logged in; Django's LocaleMiddleware).
3. The browser's Accept-Language (zh-CN -> 简体中文; LocaleMiddleware).
4. settings.LANGUAGE_CODE.

The choice is read from the database at login (`on_login`) and kept in the session, so a page
costs no query for it (a session older than this reads it once, at its next request); a change made here updates the session at once,
one made on another device shows at the next login there.
"""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation

from jobs.models.preferences import LanguagePreference

#: the session key holding the user's choice ("" = follow the browser)
SESSION_KEY = "account_language"


def is_supported(language: str) -> bool:
    """Whether `language` is one of the portal's languages (settings.LANGUAGES)."""
    return language in dict(settings.LANGUAGES)


def remember(request: HttpRequest, language: str) -> None:
    """Store `language` ("" = follow the browser) as the logged-in user's choice, for this session too."""
    LanguagePreference.choose(request.user, language)
    request.session[SESSION_KEY] = language
    if language:
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()


def apply_cookie(response: HttpResponse, language: str) -> HttpResponse:
    """Make the language cookie say `language`; "" removes it, so the browser's preference decides."""
    if language:
        response.set_cookie(settings.LANGUAGE_COOKIE_NAME, language, max_age=settings.LANGUAGE_COOKIE_AGE,
                            path=settings.LANGUAGE_COOKIE_PATH, domain=settings.LANGUAGE_COOKIE_DOMAIN,
                            secure=settings.LANGUAGE_COOKIE_SECURE, httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                            samesite=settings.LANGUAGE_COOKIE_SAMESITE)
    else:
        response.delete_cookie(settings.LANGUAGE_COOKIE_NAME, path=settings.LANGUAGE_COOKIE_PATH,
                               domain=settings.LANGUAGE_COOKIE_DOMAIN, samesite=settings.LANGUAGE_COOKIE_SAMESITE)
    return response


def chosen_language(request: HttpRequest) -> str:
    """The logged-in user's choice ("" when none, or not logged in), from the session when it is there."""
    if not request.user.is_authenticated:
        return ""
    if SESSION_KEY not in request.session:
        request.session[SESSION_KEY] = LanguagePreference.language_of(request.user)
    language = request.session[SESSION_KEY]
    return language if is_supported(language) else ""


def on_login(sender, request, user, **kwargs) -> None:
    """At login (jobs.signals connects it): the user's choice into the new session, so no page
    after it asks the database again."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = LanguagePreference.language_of(user)


class AccountLanguageMiddleware:
    """After AuthenticationMiddleware: the logged-in user's chosen language wins over the cookie and
    the browser's (what LocaleMiddleware picked), and the cookie follows it, so the login page after
    a logout still speaks it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        language = chosen_language(request)
        if language:
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        response = self.get_response(request)
        # Read again: the request may have been the one that changed it (account page, switch).
        after = request.session.get(SESSION_KEY, "") if hasattr(request, "session") else ""
        if after and is_supported(after) and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != after \
                and settings.LANGUAGE_COOKIE_NAME not in response.cookies:
            apply_cookie(response, after)
        return response
