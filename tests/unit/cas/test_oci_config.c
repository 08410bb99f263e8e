/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for cas/oci_config: the run settings of an OCI image config — the whole
 * config, docker's spelling, the inner object alone, tolerated and refused types.
 */
#include "../helpers.h"

#include "../../../cas/oci_config.h"

static void test_parse(void **state)
{
	static const char json[] =
		"{\"architecture\":\"amd64\",\"config\":{\"Entrypoint\":[\"/entry\",\"--flag\"],"
		"\"Cmd\":[\"serve\",\"a b\"],\"Env\":[\"PATH=/usr/bin:/bin\",\"A=x'y\",\"bad-name=1\"],"
		"\"WorkingDir\":\"/srv\",\"User\":\"app:staff\"}}";
	struct oci_config c;
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(oci_config_parse(json, strlen(json), &c, why, sizeof(why)), 0);
	assert_int_equal(c.n_entrypoint, 2);
	assert_string_equal(c.entrypoint[0], "/entry");
	assert_string_equal(c.entrypoint[1], "--flag");
	assert_int_equal(c.n_cmd, 2);
	assert_string_equal(c.cmd[1], "a b");
	assert_int_equal(c.n_env, 3);
	assert_string_equal(c.env[1], "A=x'y");
	assert_string_equal(c.workdir, "/srv");
	assert_string_equal(c.user, "app:staff");
	oci_config_free(&c);
	assert_null(c.entrypoint);
	oci_config_free(&c); /* again: harmless */
}

static void test_shapes(void **state)
{
	static const char docker[] = "{\"Config\":{\"Cmd\":\"/bin/sh\",\"Env\":null,"
				     "\"WorkingDir\":\"\",\"User\":null}}";
	struct oci_config c;
	char why[WHY_MAX] = "";

	(void)state;
	/* the inner object alone; an empty one */
	assert_int_equal(oci_config_parse("{\"Cmd\":[\"x\"]}", 13, &c, why, sizeof(why)), 0);
	assert_int_equal(c.n_cmd, 1);
	oci_config_free(&c);
	assert_int_equal(oci_config_parse("{}", 2, &c, why, sizeof(why)), 0);
	assert_int_equal(c.n_entrypoint + c.n_cmd + c.n_env, 0);
	assert_null(c.workdir);
	assert_null(c.user);
	oci_config_free(&c);
	/* docker's spelling; a string for a list is a list of one; null and "" are unset */
	assert_int_equal(oci_config_parse(docker, strlen(docker), &c, why, sizeof(why)), 0);
	assert_int_equal(c.n_cmd, 1);
	assert_string_equal(c.cmd[0], "/bin/sh");
	assert_int_equal(c.n_env, 0);
	assert_null(c.workdir);
	assert_null(c.user);
	oci_config_free(&c);
}

static void test_bad(void **state)
{
	struct oci_config c;
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(oci_config_parse("[1]", 3, &c, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not a JSON object"));
	assert_int_equal(oci_config_parse("{\"config\":{\"Cmd\":[1]}}", 22, &c, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "wrong type"));
	assert_null(c.cmd); /* nothing left to free */
	assert_int_equal(oci_config_parse("{\"User\":7}", 10, &c, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "wrong type"));
	assert_int_equal(oci_config_parse("{\"Env\":{}}", 10, &c, why, sizeof(why)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
