/* SPDX-License-Identifier: MIT */
/* The run settings of an OCI image config (see oci_config.h). */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "oci_config.h"
#include "oci_json.h"
#include "../common/why.h"

/* A list of strings (or one string, tolerated as a list of one); null: empty. */
static int json_strv(struct json_object *o, char ***out, size_t *n)
{
	size_t len;

	*out = NULL;
	*n = 0;
	if (!o || json_object_is_type(o, json_type_null))
		return 0;
	if (json_object_is_type(o, json_type_string)) { /* tolerated: one word */
		*out = calloc(1, sizeof(char *));
		if (!*out || !((*out)[0] = strdup(json_object_get_string(o))))
			return -ENOMEM;
		*n = 1;
		return 0;
	}
	if (!json_object_is_type(o, json_type_array))
		return -EINVAL;
	len = json_object_array_length(o);
	*out = calloc(len + 1, sizeof(char *));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(o, i);

		if (!json_object_is_type(e, json_type_string))
			return -EINVAL;
		(*out)[i] = strdup(json_object_get_string(e));
		if (!(*out)[i])
			return -ENOMEM;
		*n = i + 1;
	}
	return 0;
}

/* A string member; absent, null or "": NULL. */
static int json_str(struct json_object *o, const char *key, char **out)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	if (!json_object_get_string_len(v))
		return 0;
	*out = strdup(json_object_get_string(v));
	return *out ? 0 : -ENOMEM;
}

void oci_config_free(struct oci_config *c)
{
	char **v[] = { c->entrypoint, c->cmd, c->env };
	size_t n[] = { c->n_entrypoint, c->n_cmd, c->n_env };

	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; v[k] && i < n[k]; i++)
			free(v[k][i]);
		free(v[k]);
	}
	free(c->workdir);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

int oci_config_parse(const char *json, size_t len, struct oci_config *out, char *why,
		     size_t why_len)
{
	struct json_object *root, *cfg, *v;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (oci_json_parse(json, len, OCI_JSON_CONFIG, &root, why, why_len))
		return -EINVAL;
	if (!json_object_is_type(root, json_type_object)) {
		json_object_put(root);
		return why_set(why, why_len, -EINVAL, "image config is not a JSON object");
	}
	cfg = root;
	if (json_object_object_get_ex(root, "config", &v) && json_object_is_type(v, json_type_object))
		cfg = v;
	else if (json_object_object_get_ex(root, "Config", &v) &&
		 json_object_is_type(v, json_type_object))
		cfg = v; /* docker's container config spelling */
	if (!rc && json_object_object_get_ex(cfg, "Entrypoint", &v))
		rc = json_strv(v, &out->entrypoint, &out->n_entrypoint);
	if (!rc && json_object_object_get_ex(cfg, "Cmd", &v))
		rc = json_strv(v, &out->cmd, &out->n_cmd);
	if (!rc && json_object_object_get_ex(cfg, "Env", &v))
		rc = json_strv(v, &out->env, &out->n_env);
	if (!rc)
		rc = json_str(cfg, "WorkingDir", &out->workdir);
	if (!rc)
		rc = json_str(cfg, "User", &out->user);
	json_object_put(root);
	if (rc) {
		why_set(why, why_len, rc, "%s", rc == -ENOMEM ? "out of memory"
			: "image config: Entrypoint/Cmd/Env/WorkingDir/User has the wrong type");
		oci_config_free(out);
	}
	return rc;
}
