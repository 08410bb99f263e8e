/* SPDX-License-Identifier: MIT */
/* The platform an image index is resolved to (--platform os/arch[/variant]): oci_files.h. */
#include "oci_files.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "../../common/esc.h"
#include "../oci_json.h"

/* uname's machine in the OCI spelling (GOARCH). */
static const char *host_arch(const char *m, const char **variant)
{
	static const struct { const char *uname, *arch, *variant; } map[] = {
		{ "x86_64", "amd64", "" },   { "aarch64", "arm64", "" },
		{ "armv7l", "arm", "v7" },   { "armv6l", "arm", "v6" },
		{ "i686", "386", "" },       { "i386", "386", "" },
		{ "ppc64le", "ppc64le", "" }, { "s390x", "s390x", "" },
		{ "riscv64", "riscv64", "" },
	};

	*variant = "";
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(m, map[i].uname)) {
			*variant = map[i].variant;
			return map[i].arch;
		}
	return m;
}

static bool part_ok(const char *s, size_t n, size_t max)
{
	if (!n || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

int oci_platform_parse(const char *s, struct oci_platform *p)
{
	const char *a, *v, *variant;
	struct utsname u;

	memset(p, 0, sizeof(*p));
	if (!s) {
		if (uname(&u))
			return -errno;
		snprintf(p->os, sizeof(p->os), "linux");
		snprintf(p->arch, sizeof(p->arch), "%.31s", host_arch(u.machine, &variant));
		snprintf(p->variant, sizeof(p->variant), "%s", variant);
		return 0;
	}
	a = strchr(s, '/');
	if (!a || !part_ok(s, (size_t)(a - s), sizeof(p->os)))
		return -EINVAL;
	a++;
	v = strchr(a, '/');
	if (!part_ok(a, v ? (size_t)(v - a) : strlen(a), sizeof(p->arch)))
		return -EINVAL;
	if (v && !part_ok(v + 1, strlen(v + 1), sizeof(p->variant)))
		return -EINVAL;
	memcpy(p->os, s, (size_t)(a - 1 - s));
	memcpy(p->arch, a, v ? (size_t)(v - a) : strlen(a));
	if (v)
		snprintf(p->variant, sizeof(p->variant), "%s", v + 1);
	p->given = true;
	return 0;
}

const char *oci_platform_str(const struct oci_platform *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s%s%s", p->os, p->arch, p->variant[0] ? "/" : "", p->variant);
	return buf;
}

static bool platform_match(struct json_object *desc, const struct oci_platform *p)
{
	struct json_object *pl = oci_json_get(desc, "platform", json_type_object);
	const char *os = oci_json_str(pl, "os"), *arch = oci_json_str(pl, "architecture");
	const char *var = oci_json_str(pl, "variant");

	if (!os || !arch || strcmp(os, p->os) || strcmp(arch, p->arch))
		return false;
	return !var || !p->variant[0] || !strcmp(var, p->variant);
}

struct json_object *oci_platform_pick(struct json_object *list, const struct oci_platform *p)
{
	size_t n = json_object_array_length(list);

	for (size_t i = 0; i < n; i++)
		if (platform_match(json_object_array_get_idx(list, i), p))
			return json_object_array_get_idx(list, i);
	/* one image: taken unless it says it is for another platform than the one asked */
	if (n == 1 && (!p->given || !oci_json_get(json_object_array_get_idx(list, 0), "platform",
						   json_type_object)))
		return json_object_array_get_idx(list, 0);
	return NULL;
}

const char *oci_platform_list(struct json_object *list, char *buf, size_t len)
{
	size_t n = json_object_array_length(list), used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		struct json_object *p = oci_json_get(json_object_array_get_idx(list, i), "platform",
						     json_type_object);
		const char *os = oci_json_str(p, "os"), *arch = oci_json_str(p, "architecture");
		const char *var = oci_json_str(p, "variant");
		char b1[32], b2[32], b3[32];
		int w;

		w = snprintf(buf + used, len - used, "%s%s/%s%s%s", used ? ", " : "",
			     os ? esc_str(os, b1, sizeof(b1)) : "?",
			     arch ? esc_str(arch, b2, sizeof(b2)) : "?", var ? "/" : "",
			     var ? esc_str(var, b3, sizeof(b3)) : "");
		used += w > 0 ? (size_t)w : 0;
	}
	return buf;
}
