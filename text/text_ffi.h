#pragma once
// The C ABI of text/rust/ (the wgnn_text crate: Hugging Face's tokenizers
// and minijinja). Only text/*.cpp include this; the rest of the project uses
// text/tokenizer.h and text/chat_template.h. A function that can fail
// returns null on success, else an error message freed with
// wgnn_text_free_string.
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct WgnnTokenizer WgnnTokenizer;

void wgnn_text_free_string(char* s);
void wgnn_text_free_bytes(char* s, size_t len);
void wgnn_text_free_ids(int64_t* ids, size_t n);

char* wgnn_text_tokenizer_load(const char* path, WgnnTokenizer** out);
char* wgnn_text_tokenizer_from_json(const char* json, size_t len, WgnnTokenizer** out);
void wgnn_text_tokenizer_free(WgnnTokenizer* t);
size_t wgnn_text_vocab_size(const WgnnTokenizer* t);
char* wgnn_text_encode(const WgnnTokenizer* t, const char* text, size_t len, int add_special_tokens, int64_t** ids,
                       size_t* n);
char* wgnn_text_decode(const WgnnTokenizer* t, const int64_t* ids, size_t n, int skip_special_tokens, char** out,
                       size_t* out_len);
char* wgnn_text_token_to_id(const WgnnTokenizer* t, const char* token, size_t len, int64_t* id);
int wgnn_text_is_special(const WgnnTokenizer* t, int64_t id);

char* wgnn_text_render_chat(const char* chat_template, const char* messages_json, int add_generation_prompt,
                            const char* bos_token, const char* eos_token, const char* extra_json, char** out,
                            size_t* out_len);

#ifdef __cplusplus
}
#endif
