// `value()` of a failed `karu::Expected`, as the README writes it:
// `karu::Client::create().value()`, run with a misspelled `KARU_*` variable in the environment
// (the client's build fails). Compiled with exceptions and without (`-fno-exceptions`) by
// tests/c_programs.rs.
//
// argv: MODE
//   caught   (exceptions) catch the `karu::Error` as itself and as a `std::exception`, check
//            that they agree, print `caught STATUS_NAME` and the message on the next line, exit 0
//   uncaught the error leaves `main` (with exceptions: std::terminate; without: the facade
//            prints it to stderr and aborts)
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

#include "karu.hpp"

static_assert(std::is_base_of_v<std::exception, karu::Error>);

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (std::strcmp(argv[1], "uncaught") == 0) {
        karu::Client client = karu::Client::create().value();
        std::printf("built a client: %p\n", static_cast<const void *>(client.get()));
        return 0;
    }
#if defined(__cpp_exceptions)
    if (std::strcmp(argv[1], "caught") == 0) {
        std::string as_exception;
        try {
            karu::Client::create().value();
        } catch (const std::exception &e) {
            as_exception = e.what();
        }
        try {
            karu::Client client = karu::Client::create().value();
            std::printf("built a client: %p\n", static_cast<const void *>(client.get()));
            return 1;
        } catch (const karu::Error &e) {
            // The same error, however it is caught; what() is the message.
            if (as_exception != e.what() || e.message != e.what() || e.message.empty()) return 1;
            // The Expected itself carries the same error as value() threw.
            auto failed = karu::Client::create();
            if (failed || failed.error().status != e.status || failed.error().message != e.message) return 1;
            std::printf("caught %s\n%s\n", karu::name(e.status), e.message.c_str());
            return 0;
        }
    }
#endif
    return 2;
}
