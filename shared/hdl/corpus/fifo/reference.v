// Reference FIFO: two-bit pointers and an explicit occupancy count.
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
    reg [7:0] slots [0:3];
    reg [1:0] head;   // next slot to read
    reg [1:0] tail;   // next slot to write
    reg [2:0] used;   // entries held, 0 to 4

    wire push = wr_en && (used != 3'd4);
    wire pop  = rd_en && (used != 3'd0);

    assign empty = (used == 3'd0);
    assign full  = (used == 3'd4);
    assign dout  = slots[head];

    always @(posedge clk) begin
        if (push && !rst)
            slots[tail] <= din;
        if (rst) begin
            head <= 2'd0;
            tail <= 2'd0;
            used <= 3'd0;
        end else begin
            if (push)
                tail <= tail + 2'd1;
            if (pop)
                head <= head + 2'd1;
            used <= used + {2'b00, push} - {2'b00, pop};
        end
    end
endmodule
