"""Sending mail: the verification codes of account registration.

A message goes out one of two ways, as ``[accounts]`` says: piped whole (headers and body, RFC 5322)
into ``email_command``, the way ``sendmail -t`` takes it, or handed to the SMTP server
``email_smtp`` with the standard library's ``smtplib`` in a worker thread, so the event loop never
waits on the network. Either way a failure is a ``MailError`` with a short reason for the log;
the client is only told that the code could not be sent.
"""

from __future__ import annotations

import asyncio
import email.utils
import smtplib
import ssl
from email.message import EmailMessage
from typing import TYPE_CHECKING

import anyio

from ircd.config import parse_hostport

if TYPE_CHECKING:
    from ircd.config import AccountsSection

__all__ = ["MailError", "build_message", "send_mail", "send_message"]

TIMEOUT = 30.0  # seconds one delivery may take


class MailError(Exception):
    pass


def build_message(cfg: AccountsSection, to: str, subject: str, body: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = cfg.email_from
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = email.utils.formatdate(usegmt=True)
    msg["Message-ID"] = email.utils.make_msgid(domain=cfg.email_from.rpartition("@")[2] or None)
    msg.set_content(body)
    return msg


async def send_message(cfg: AccountsSection, msg: EmailMessage) -> None:
    """Deliver ``msg`` through ``email_command`` or ``email_smtp``; raises MailError."""
    if cfg.email_command:
        await _pipe(cfg.email_command, msg.as_bytes())
    elif cfg.email_smtp:
        await anyio.to_thread.run_sync(_smtp, cfg, msg)
    else:
        raise MailError("no way to send mail: set accounts.email_command or accounts.email_smtp")


async def send_mail(cfg: AccountsSection, to: str, subject: str, body: str) -> str | None:
    """Send one message: None when it went, else the reason it did not (for the log)."""
    try:
        await send_message(cfg, build_message(cfg, to, subject, body))
    except MailError as exc:
        return str(exc)
    return None


async def _pipe(argv: list[str], data: bytes) -> None:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise MailError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        _, err = await asyncio.wait_for(proc.communicate(data), TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise MailError(f"{argv[0]} did not finish within {TIMEOUT:.0f} seconds") from None
    if proc.returncode != 0:
        text = err.decode("utf-8", "replace").strip().splitlines()
        raise MailError(f"{argv[0]} exited with status {proc.returncode}" + (f": {text[-1]}" if text else ""))


def _smtp(cfg: AccountsSection, msg: EmailMessage) -> None:
    """In a worker thread: one SMTP session for one message."""
    assert cfg.email_smtp is not None
    host, port = parse_hostport(cfg.email_smtp)
    context = ssl.create_default_context()
    try:
        smtp: smtplib.SMTP
        if cfg.email_smtp_tls == "tls":
            smtp = smtplib.SMTP_SSL(host, port, timeout=TIMEOUT, context=context)
        else:
            smtp = smtplib.SMTP(host, port, timeout=TIMEOUT)
        with smtp:
            if cfg.email_smtp_tls == "starttls":
                smtp.starttls(context=context)
            if cfg.email_smtp_username is not None:
                smtp.login(cfg.email_smtp_username, cfg.email_smtp_password or "")
            smtp.send_message(msg)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailError(f"SMTP {cfg.email_smtp}: {exc}") from None
