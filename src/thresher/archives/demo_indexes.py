"""The index pages of Mailman 2 and Apache mod_mbox, as the demo archive serves them
(`demo_pages`): pure functions, no I/O.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from .demo_mbox import MONTH_NAMES, pipermail_file
from .demo_messages import MONTHS

__all__ = ["modmbox_index_html", "pipermail_index_html"]


def _size(size: int) -> str:
    # Mailman 2's HyperArch.sizeof: decimal units, truncated.
    if size < 1000:
        return f" {size} bytes "
    if size < 1000000:
        return f" {size // 1000} KB "
    return f" {size // 1000000} MB "


def pipermail_index_html(list_name: str, months: Mapping[str, int]) -> str:
    """Mailman 2's archive index page: a table row per month, newest first, linking the
    month's thread/subject/author/date pages and its ``YYYY-Month.txt.gz`` (whose size in
    bytes is the value in `months`)."""
    title = html.escape(list_name.capitalize())
    rows = []
    for month in sorted(months, reverse=True):
        stem = pipermail_file(month)
        label = f"{MONTH_NAMES[int(month[5:7]) - 1]} {month[:4]}"
        rows.append(
            f"""	    <tr>
            <td>{label}:</td>
            <td>
              <A href="{stem}/thread.html">[ Thread ]</a>
              <A href="{stem}/subject.html">[ Subject ]</a>
              <A href="{stem}/author.html">[ Author ]</a>
              <A href="{stem}/date.html">[ Date ]</a>
            </td>
            <td><a href="{stem}.txt.gz">[ Gzip'd Text{_size(months[month])}]</a></td>
            </tr>
"""
        )
    table = (
        "\t<table border=3>\n\t  <tr><td>Archive</td>\n\t  <td>View by:</td>\n"
        f"\t  <td>Downloadable version</td></tr>\n\n{''.join(rows)}\t</table>\n"
        if rows
        else "\t<p>Currently, there are no archives. </p>\n"
    )
    return f"""<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2//EN">
<HTML>
  <HEAD>
     <title>The {title} Archives</title>
     <META NAME="robots" CONTENT="noindex,follow">
     <META http-equiv="Content-Type" content="text/html; charset=us-ascii">
  </HEAD>
  <BODY BGCOLOR="#ffffff">
     <h1>The {title} Archives </h1>
     <p>
      You can get <a href="/mailman/listinfo/{html.escape(list_name)}">more information about
      this list</a>.
     </p>
{table}     </BODY>
     </HTML>
"""


def modmbox_index_html(list_name: str, months_with_counts: Mapping[str, int]) -> str:
    """Apache mod_mbox's list index: ``<table id="grid">`` holding a table per year, a
    row per month (newest first) with Thread/Date/Author links and the message count in
    ``<td class="msgcount">``. `list_name` is shown as the title (mod_mbox shows the
    list's address)."""
    title = html.escape(list_name)
    by_year: dict[str, list[str]] = {}
    for month in sorted(months_with_counts, reverse=True):
        key = month.replace("-", "")
        label = f"{MONTHS[int(month[5:7]) - 1]} {month[:4]}"
        by_year.setdefault(month[:4], []).append(
            f'<tr><td class="date">{label}</td><td class="links"><span class="links" '
            f'id="{key}"><a href="{key}.mbox/thread">Thread</a> &middot; '
            f'<a href="{key}.mbox/date">Date</a> &middot; '
            f'<a href="{key}.mbox/author">Author</a></span></td>'
            f'<td class="msgcount">{months_with_counts[month]}</td></tr>'
        )
    years = "".join(
        f'<tr><td class="year"><table class="year">\n<thead><tr><th colspan="3">Year {year}'
        "</th></tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table></td></tr>\n"
        for year, rows in by_year.items()
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
 <head>
  <title>{title} Archives</title>
  <link rel="stylesheet" href="/archives/style.css" type="text/css" media="screen" />
 </head>
 <body id="archives">
  <h1>Mailing list archives: {title}</h1>
  <h5><a href="/mod_mbox/" title="Back to the archives depot">Site index</a></h5>
  <table id="grid">
{years}  </table>
 </body>
</html>
"""
