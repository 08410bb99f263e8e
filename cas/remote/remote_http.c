/* SPDX-License-Identifier: MIT */
/*
 * cas/remote/remote_http: the http(s):// backend. The remote is a store's layout served as
 * static files: chunk <hex> is GET PATH/chunks/<2 hex>/<hex>; push is a HEAD, then a PUT
 * to the same name for servers that accept it. Credentials, when given, are HTTP basic on
 * every request.
 */
#include "remote_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/why.h"

static bool http_match(const char *url)
{
	return !strncmp(url, "http://", 7) || !strncmp(url, "https://", 8);
}

static int http_parse(struct remote *r, const char *url, char *why, size_t why_len)
{
	const char *host = strstr(url, "://") + 3;
	size_t n = strlen(url);

	if (!*host || *host == '/')
		return why_set(why, why_len, -EINVAL, "no host in the remote URL");
	if (strpbrk(url, "?# \t\r\n"))
		return why_set(why, why_len, -EINVAL,
			       "the remote URL must not have a query, a fragment or spaces");
	r->basic = true;   /* credentials, when given, go with every request */
	r->base = malloc(n + 2);
	if (!r->base)
		return -ENOMEM;
	memcpy(r->base, url, n + 1);
	if (!strchr(host, '/') || url[n - 1] != '/')
		strcat(r->base, "/");
	return 0;
}

static int http_locate(struct remote *r, const uint8_t d[SHA256_LEN], const char *hex,
		       struct remote_loc *loc)
{
	(void)d;
	if (asprintf(&loc->url, "%schunks/%.2s/%s", r->base, hex, hex) < 0) {
		loc->url = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int http_put(struct remote *r, const uint8_t d[SHA256_LEN], const void *frame,
		    size_t len, const char *what, char *why, size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1], *url = NULL;
	int ret;

	sha256_to_hex(d, hex);
	if (asprintf(&url, "%schunks/%.2s/%s", r->base, hex, hex) < 0)
		return -ENOMEM;
	ret = remote_head(r, url, what, why, why_len);
	if (ret == 0) {
		ret = remote_send(r, "PUT", url, frame, len, NULL, 0, 0, what, NULL, why, why_len);
		if (!ret)
			ret = 1;
	} else if (ret == 1) {
		ret = 0;
	}
	free(url);
	return ret;
}

const struct remote_ops remote_http_ops = {
	.match = http_match,
	.parse = http_parse,
	.locate = http_locate,
	.put = http_put,
};
