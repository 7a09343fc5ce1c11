# llhttp: Debian ships no library, only the generated C sources (package node-llhttp).
# Build them out of tree into a static archive; they are not our code, so warnings stay relaxed.
LLHTTP_OBJS = $(addprefix $(BUILD)/third_party/llhttp/,llhttp.o api.o http.o)

$(BUILD)/third_party/llhttp/%.o: $(LLHTTP_SRC_DIR)/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	@test -r $< || { echo "llhttp sources missing: run 'make deps' (package node-llhttp)" >&2; exit 1; }
	$(CC) -std=c11 $(OPT) $(DEBUG) -fPIE -w -I$(LLHTTP_INC_DIR) -c $< -o $@

$(LLHTTP_LIB): $(LLHTTP_OBJS)
	$(AR) rcs $@ $^
