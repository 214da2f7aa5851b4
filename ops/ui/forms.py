"""The UI's forms. They parse types; the token service owns the rules (roles, lifetime bounds)."""
from __future__ import annotations

from django import forms

from tokens.access import DEFAULT_ROLE


class SignInForm(forms.Form):
    username = forms.CharField(max_length=255)
    password = forms.CharField(max_length=1024, strip=False, widget=forms.PasswordInput)


def globs(text: str) -> list[str] | None:
    """Repository globs typed one per line, or separated by commas or spaces; None for none."""
    found = [glob for glob in text.replace(",", " ").split() if glob]
    return found or None


class TokenForm(forms.Form):
    role = forms.CharField(initial=DEFAULT_ROLE.value)
    ttl_days = forms.IntegerField(initial=30, label="Lifetime (days)")
    description = forms.CharField(required=False, max_length=1024)
    repositories = forms.CharField(required=False, max_length=8192, widget=forms.Textarea)


class RevokeForm(forms.Form):
    hash_prefix = forms.CharField(max_length=64)



class RepositoryDeleteForm(forms.Form):
    confirm_name = forms.CharField(max_length=255, label="Repository name")
