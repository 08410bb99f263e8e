/* SPDX-License-Identifier: MIT */
/*
 * URLs the remotes are sent to by a server (an upload's Location, a token realm), judged
 * through libcurl's own parser, so that what is compared is what curl will connect to; the
 * dates servers send; the next page a Link header names.
 */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../../common/dl_curl.h"
#include "../../common/why.h"

static CURLU *url_new(void)
{
	return dl_curl_load() ? NULL : sym_curl_url();
}

static char *url_part(CURLU *u, CURLUPart what, unsigned flags)
{
	char *p = NULL, *c;

	if (sym_curl_url_get(u, what, &p, flags) != CURLUE_OK || !p)
		return NULL;
	c = strdup(p);
	sym_curl_free(p);
	return c;
}

static bool url_has_part(CURLU *u, CURLUPart what)
{
	char *p = NULL;
	bool has = sym_curl_url_get(u, what, &p, 0) == CURLUE_OK && p;

	sym_curl_free(p);
	return has;
}

int http_url_resolve(const char *base, const char *ref, const char *query, char **out,
		     char *why, size_t why_len)
{
	CURLU *u;
	char *scheme = NULL;
	int ret = -EINVAL;

	*out = NULL;
	if (dl_curl_load())
		return -ELIBACC;
	u = sym_curl_url();
	if (!u)
		return -ENOMEM;
	why_set(why, why_len, 0, "not a valid URL");
	if (sym_curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
	    sym_curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK)
		goto out;
	scheme = url_part(u, CURLUPART_SCHEME, 0);
	if (!scheme || (strcasecmp(scheme, "http") && strcasecmp(scheme, "https"))) {
		why_set(why, why_len, 0, "not an http(s) URL");
		goto out;
	}
	if (url_has_part(u, CURLUPART_USER) || url_has_part(u, CURLUPART_PASSWORD)) {
		why_set(why, why_len, 0, "carries credentials (user@host)");
		goto out;
	}
	if (query && sym_curl_url_set(u, CURLUPART_QUERY, query, CURLU_APPENDQUERY) != CURLUE_OK)
		goto out;
	*out = url_part(u, CURLUPART_URL, 0);
	ret = *out ? 0 : -ENOMEM;
out:
	free(scheme);
	sym_curl_url_cleanup(u);
	return ret;
}

/* scheme, host, port of an absolute URL; false if it has not all three. */
static bool url_origin(const char *url, char *parts[3])
{
	static const CURLUPart what[3] = { CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT };
	CURLU *u = url_new();
	bool ok;

	parts[0] = parts[1] = parts[2] = NULL;
	if (!u)
		return false;
	ok = sym_curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK;
	for (int i = 0; ok && i < 3; i++) {
		parts[i] = url_part(u, what[i], i == 2 ? CURLU_DEFAULT_PORT : 0);
		ok = parts[i] != NULL;
	}
	sym_curl_url_cleanup(u);
	return ok;
}

bool http_same_origin(const char *a, const char *b)
{
	char *pa[3] = { NULL }, *pb[3] = { NULL };
	bool same = url_origin(a, pa) && url_origin(b, pb) && !strcasecmp(pa[0], pb[0]) &&
		    !strcasecmp(pa[1], pb[1]) && !strcmp(pa[2], pb[2]);

	for (int i = 0; i < 3; i++) {
		free(pa[i]);
		free(pb[i]);
	}
	return same;
}

int64_t http_date_parse(const char *s)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	char wd[4], mon[4], gmt[4];
	struct tm tm = { 0 };
	const char *m;
	int n = 0;

	if (!s || sscanf(s, "%3s, %2d %3s %4d %2d:%2d:%2d %3s%n", wd, &tm.tm_mday, mon,
			 &tm.tm_year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, gmt, &n) != 8 ||
	    s[n] || strcmp(gmt, "GMT") || strlen(mon) != 3 || !(m = strstr(months, mon)) ||
	    (m - months) % 3 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970)
		return -1;
	tm.tm_mon = (int)(m - months) / 3;
	tm.tm_year -= 1900;
	return (int64_t)timegm(&tm);
}

/* ------------------------------------------------------------------ Link headers */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Whether a rel value (a space-separated list of relation types) names "next". */
static bool rel_is_next(const char *v, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t k = i;

		while (k < n && v[k] != ' ' && v[k] != '\t')
			k++;
		if (k - i == 4 && !strncasecmp(v + i, "next", 4))
			return true;
		i = k + 1;
	}
	return false;
}

/*
 * One link-param after its ';' (RFC 8288 3: name, optional '=' and a token or a quoted
 * string), *next set when it is rel naming "next". The position after it, or NULL.
 */
static const char *link_param(const char *p, bool *next)
{
	const char *name = p, *v;
	size_t nn, vn;

	while (*p && !strchr(" \t=;,", *p))
		p++;
	nn = (size_t)(p - name);
	p = skip_ws(p);
	if (!nn)
		return NULL;
	if (*p != '=')
		return p;
	p = skip_ws(p + 1);
	if (*p == '"') {
		v = ++p;
		while (*p && *p != '"')
			p += p[0] == '\\' && p[1] ? 2 : 1;
		if (*p != '"')
			return NULL;
		vn = (size_t)(p++ - v);
	} else {
		v = p;
		while (*p && !strchr(" \t;,", *p))
			p++;
		vn = (size_t)(p - v);
	}
	if (nn == 3 && !strncasecmp(name, "rel", 3) && rel_is_next(v, vn))
		*next = true;
	return skip_ws(p);
}

int http_link_next(const char *link, char **ref)
{
	const char *p = link;

	*ref = NULL;
	if (!link)
		return -ENOENT;
	for (;;) {
		const char *uri, *end;
		bool next = false;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			return -ENOENT;
		if (*p != '<' || !(end = strchr(p + 1, '>')))
			return -EBADMSG;
		uri = p + 1;
		p = skip_ws(end + 1);
		while (*p == ';') {
			p = link_param(skip_ws(p + 1), &next);
			if (!p)
				return -EBADMSG;
		}
		if (*p && *p != ',')
			return -EBADMSG;
		if (next) {
			*ref = strndup(uri, (size_t)(end - uri));
			return *ref ? 0 : -ENOMEM;
		}
	}
}
