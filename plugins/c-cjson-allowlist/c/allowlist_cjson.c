/*
 * The allowlist provider, in C11, against guardhost's C ABI (guardhost.h),
 * reading its JSON with cJSON (the system's libcjson, 1.7.13 or later for
 * cJSON_ParseWithLength).
 *
 * Config: {"allowed_tools": [str] | null, "denied_tools": [str] | null}.
 * Decisions are those of plugins/c-allowlist and guardhost's built-in
 * allowlist: a name with an ASCII control character is denied
 * (oap.invalid_tool_name); a name not in `allowed_tools` (if given), or in
 * `denied_tools` (compared after trimming ASCII white space), is denied
 * (oap.tool_not_allowed); any other is allowed (oap.allowed).
 *
 * What a JSON reader must cope with, and what this one does about it:
 * - a NUL character (\u0000) in a string: cJSON's strings end at the first
 *   NUL, so "bash\u0000x" would read as "bash". A request whose text holds
 *   one is denied (cjson.unreadable) rather than read cut short; a config
 *   that holds one is refused.
 * - a lone surrogate (\ud800 with no low half): cJSON refuses the whole
 *   text, and so the call is an error (fail_closed decides).
 * - a key twice in one object: JSON readers disagree on which value counts
 *   (cJSON's lookups find the first). Refused at any depth, as an error.
 * - a `tool_input` that is not an object: an error, never "no arguments".
 * Errors and messages never quote a configured value: they name the key.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "guardhost.h"

typedef struct {
    bool present; /* the key was given as a list (null or absent: false) */
    size_t count;
    char **items;
} string_list;

typedef struct {
    string_list allowed, denied;
} allowlist;

/* ---- what cJSON leaves to its caller ---------------------------------- */

/* Whether `text` holds a NUL: a raw byte, or the escape \u0000 (an escape
 * when an odd number of backslashes precede its `u`; outside strings a
 * backslash is not JSON, and cJSON refuses it). */
static bool holds_nul(const char *text, size_t len) {
    if (memchr(text, '\0', len)) return true;
    for (size_t i = 0; i + 6 <= len; i++) {
        if (memcmp(text + i, "\\u0000", 6) != 0) continue;
        size_t slashes = 0;
        while (slashes <= i && text[i - slashes] == '\\') slashes++;
        if (slashes % 2 == 1) return true;
    }
    return false;
}

/* Whether an object, or any object inside `item`, holds a key twice. */
static bool has_duplicate_key(const cJSON *item) {
    for (const cJSON *child = item->child; child; child = child->next) {
        if (cJSON_IsObject(item)) {
            for (const cJSON *earlier = item->child; earlier != child; earlier = earlier->next) {
                if (strcmp(earlier->string, child->string) == 0) return true;
            }
        }
        if (has_duplicate_key(child)) return true;
    }
    return false;
}

/* A copy of `message` for the host, which frees it with free_buffer. */
static guardhost_status fail(const char *message, char **out, size_t *out_len) {
    size_t len = strlen(message);
    char *copy = malloc(len + 1);
    if (copy) memcpy(copy, message, len + 1);
    *out = copy;
    *out_len = copy ? len : 0;
    return GUARDHOST_ERROR;
}

/* ---- the config ------------------------------------------------------- */

static void free_list(string_list *list) {
    for (size_t i = 0; i < list->count; i++) free(list->items[i]);
    free(list->items);
}

static bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* `value` (null, or a list of strings) into `list`; the error names the key. */
static bool read_list(const cJSON *value, const char *key, bool trim, string_list *list, char *error, size_t size) {
    if (cJSON_IsNull(value)) return true;
    if (!cJSON_IsArray(value)) {
        snprintf(error, size, "`%s` must be a list of tool names or null", key);
        return false;
    }
    list->present = true;
    size_t count = (size_t)cJSON_GetArraySize(value), at = 0;
    list->items = calloc(count ? count : 1, sizeof *list->items);
    if (!list->items) {
        snprintf(error, size, "out of memory");
        return false;
    }
    for (const cJSON *item = value->child; item; item = item->next, at++) {
        if (!cJSON_IsString(item)) {
            snprintf(error, size, "`%s[%zu]` must be a string (a tool name)", key, at);
            return false;
        }
        const char *s = item->valuestring;
        size_t start = 0, end = strlen(s);
        while (trim && start < end && is_ascii_space(s[start])) start++;
        while (trim && end > start && is_ascii_space(s[end - 1])) end--;
        char *copy = malloc(end - start + 1);
        if (!copy) {
            snprintf(error, size, "out of memory");
            return false;
        }
        memcpy(copy, s + start, end - start);
        copy[end - start] = '\0';
        list->items[list->count++] = copy;
    }
    return true;
}

static guardhost_status create(const char *config, size_t config_len, void **provider, char **error,
                               size_t *error_len) {
    char message[160] = "";
    allowlist *self = calloc(1, sizeof *self);
    cJSON *root = NULL;
    if (!self) {
        snprintf(message, sizeof message, "out of memory");
    } else if (holds_nul(config, config_len)) {
        snprintf(message, sizeof message, "the config holds a NUL character (\\u0000); no tool name has one");
    } else if (!(root = cJSON_ParseWithLength(config, config_len)) || !cJSON_IsObject(root)) {
        snprintf(message, sizeof message, "the config must be a JSON object");
    } else if (has_duplicate_key(root)) {
        snprintf(message, sizeof message, "the config holds a key twice in one object");
    } else {
        for (const cJSON *entry = root->child; entry && !message[0]; entry = entry->next) {
            if (strcmp(entry->string, "allowed_tools") == 0) {
                read_list(entry, "allowed_tools", false, &self->allowed, message, sizeof message);
            } else if (strcmp(entry->string, "denied_tools") == 0) {
                read_list(entry, "denied_tools", true, &self->denied, message, sizeof message);
            } else {
                snprintf(message, sizeof message, "unknown config key `%.60s`; the keys are allowed_tools, denied_tools",
                         entry->string);
            }
        }
    }
    cJSON_Delete(root);
    if (message[0]) {
        if (self) {
            free_list(&self->allowed);
            free_list(&self->denied);
            free(self);
        }
        return fail(message, error, error_len);
    }
    *provider = self;
    return GUARDHOST_OK;
}

/* ---- a decision ------------------------------------------------------- */

static bool contains(const string_list *list, const char *name, size_t len) {
    for (size_t i = 0; i < list->count; i++) {
        if (strlen(list->items[i]) == len && memcmp(list->items[i], name, len) == 0) return true;
    }
    return false;
}

/* The decision as JSON, built by cJSON (which escapes the message). */
static guardhost_status decide(bool allow, const char *code, const char *message, char **out, size_t *out_len) {
    cJSON *decision = cJSON_CreateObject();
    bool built = cJSON_AddBoolToObject(decision, "allow", allow) != NULL;
    cJSON *reasons = built ? cJSON_AddArrayToObject(decision, "reasons") : NULL;
    cJSON *reason = cJSON_CreateObject();
    built = reasons && reason && cJSON_AddItemToArray(reasons, reason) &&
            cJSON_AddStringToObject(reason, "code", code) && cJSON_AddStringToObject(reason, "message", message);
    if (!built && reason && (!reasons || reasons->child != reason)) cJSON_Delete(reason);
    char *text = built ? cJSON_PrintUnformatted(decision) : NULL;
    cJSON_Delete(decision);
    if (!text) return fail("out of memory", out, out_len);
    /* Printed with cJSON's default hooks, malloc: free_buffer frees it. */
    *out = text;
    *out_len = strlen(text);
    return GUARDHOST_OK;
}

static guardhost_status deny_name(const char *prefix, const char *name, const char *suffix, char **out,
                                  size_t *out_len) {
    size_t len = strlen(prefix) + strlen(name) + strlen(suffix) + 1;
    char *message = malloc(len);
    if (!message) return fail("out of memory", out, out_len);
    snprintf(message, len, "%s%s%s", prefix, name, suffix);
    guardhost_status status = decide(false, "oap.tool_not_allowed", message, out, out_len);
    free(message);
    return status;
}

static guardhost_status evaluate(void *provider, const char *request, size_t request_len, char **output,
                                 size_t *output_len) {
    const allowlist *self = provider;
    if (holds_nul(request, request_len)) {
        return decide(false, "cjson.unreadable",
                      "the call holds a NUL character (\\u0000), which this provider's JSON reader cannot hold; "
                      "denied rather than read cut short",
                      output, output_len);
    }
    cJSON *root = cJSON_ParseWithLength(request, request_len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail("the request is not a JSON object cJSON can read (a lone surrogate, or malformed)", output,
                    output_len);
    }
    const char *why = NULL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "tool_name");
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "tool_input");
    if (has_duplicate_key(root)) {
        why = "the request holds a key twice in one object";
    } else if (!cJSON_IsString(name)) {
        why = "the request's `tool_name` is missing or not a string";
    } else if (!cJSON_IsObject(input)) {
        why = "the request's `tool_input` is missing or not an object";
    }
    if (why) {
        cJSON_Delete(root);
        return fail(why, output, output_len);
    }
    const char *tool = name->valuestring;
    size_t len = strlen(tool);
    guardhost_status status;
    size_t control_at = len;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)tool[i];
        if (c < 0x20 || c == 0x7F) {
            control_at = i;
            break;
        }
    }
    if (control_at < len) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, "' contains a control character (U+%04X)", (unsigned char)tool[control_at]);
        size_t size = strlen("tool name '") + len + strlen(suffix) + 1;
        char *message = malloc(size);
        if (message) snprintf(message, size, "tool name '%s%s", tool, suffix);
        status = message ? decide(false, "oap.invalid_tool_name", message, output, output_len)
                         : fail("out of memory", output, output_len);
        free(message);
    } else if (self->allowed.present && !contains(&self->allowed, tool, len)) {
        status = deny_name("tool '", tool, "' not in allowlist", output, output_len);
    } else {
        size_t start = 0, end = len;
        while (start < end && is_ascii_space(tool[start])) start++;
        while (end > start && is_ascii_space(tool[end - 1])) end--;
        status = contains(&self->denied, tool + start, end - start)
                     ? deny_name("tool '", tool, "' is denied", output, output_len)
                     : decide(true, "oap.allowed", "", output, output_len);
    }
    cJSON_Delete(root);
    return status;
}

static void destroy(void *provider) {
    allowlist *self = provider;
    free_list(&self->allowed);
    free_list(&self->denied);
    free(self);
}

/* Every buffer handed to the host came from malloc, directly or through
 * cJSON's default hooks, which this library never changes. */
static void free_buffer(char *buffer, size_t len) {
    (void)len;
    free(buffer);
}

static const char *const accepted_keys[] = {"allowed_tools", "denied_tools", NULL};

GUARDHOST_EXPORT const guardhost_descriptor CJsonAllowlistProvider = {
    GUARDHOST_DESCRIPTOR_INIT,
    .name = "c-cjson-allowlist",
    .accepted_keys = accepted_keys,
    .flags = 0,
    .create = create,
    .evaluate = evaluate,
    .destroy = destroy,
    .free_buffer = free_buffer,
};
