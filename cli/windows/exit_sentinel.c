/*
 * The exit sentinel of guardhost.exe (Windows).
 *
 * A provider running in guardhost's process can end it by calling `exit`.
 * On Windows a Rust provider's `exit` is `ExitProcess`, which runs none of
 * the program's exit handlers; it does tell every loaded DLL, through
 * DllMain, that the process is ending. guardhost carries this DLL, loads it
 * when a command that calls a provider in process starts, and hands it a
 * function of its own: when the process ends while that function has a
 * message (a command is armed), the sentinel writes it to standard error
 * and ends the process with guardhost's status for "a provider ended the
 * process" instead of the provider's. A normal end of guardhost has no
 * message, and the sentinel does nothing.
 */
#include <windows.h>

/* Returns the message to print (its length in *len), or NULL. */
typedef const char *(*guardhost_message_fn)(size_t *len);

static volatile guardhost_message_fn message = NULL;
static volatile UINT status = 0;

__declspec(dllexport) void guardhost_sentinel_arm(guardhost_message_fn callback, UINT exit_status)
{
    status = exit_status;
    message = callback;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance;
    /* `reserved` is non-NULL when the process is ending (not unloading). */
    if (reason == DLL_PROCESS_DETACH && reserved != NULL && message != NULL) {
        size_t len = 0;
        const char *text = message(&len);
        if (text != NULL) {
            DWORD written = 0;
            WriteFile(GetStdHandle(STD_ERROR_HANDLE), text, (DWORD)len, &written, NULL);
            TerminateProcess(GetCurrentProcess(), status);
        }
    }
    return TRUE;
}
