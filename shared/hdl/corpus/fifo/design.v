// Synchronous first-word-fall-through FIFO: 4 entries of 8 bits.
// Pointers carry one extra bit so that full and empty can be told apart.
module fifo (
    input  wire       clk,
    input  wire       rst,
    input  wire       wr_en,
    input  wire [7:0] din,
    input  wire       rd_en,
    output wire [7:0] dout,
    output wire       full,
    output wire       empty
);
    reg [7:0] mem [0:3];
    reg [2:0] wptr;
    reg [2:0] rptr;

    assign empty = (wptr == rptr);
    assign full  = (wptr[1:0] == rptr[1:0]) && (wptr[2] != rptr[2]);
    assign dout  = mem[rptr[1:0]];

    always @(posedge clk) begin
        if (rst) begin
            wptr <= 3'd0;
            rptr <= 3'd0;
        end else begin
            if (wr_en && !full) begin
                mem[wptr[1:0]] <= din;
                wptr <= wptr + 3'd1;
            end
            if (rd_en && !empty)
                rptr <= rptr + 3'd1;
        end
    end
endmodule
